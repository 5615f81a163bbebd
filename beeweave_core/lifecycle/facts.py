"""Facts (one current value per subject, with version history), opinions (several views,
each with its source and confidence) and conflict groups."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import DuplicateIdError, InvalidInputError, NotFoundError
from ..events import EventType
from ..records import ChunkStatus, KnowledgeChunk, new_id
from ..user_data import Staged, named_entries, sequence, user_entries
from ..validation import check_text, check_user, id_list
from .base import LifecycleContext
from .conflicts import GROUP_KEY, conflict_order
from .expiry import rule_expiry
from .feedback import FEEDBACK_KEY, STALE_KEY
from .history import read_versions
from .reports import MemoryVersion
from .timeline import FactTimeline

__all__ = ["Facts", "FACTS", "CONFLICTS"]

FACTS = "lifecycle.facts"  # kv: "<user>\x1f<subject key>" -> {"chunk_id", "subject_key"}
CONFLICTS = "lifecycle.conflicts"  # kv: "<user>\x1f<group>" -> {"ids": [...]}


def _fact_id(key: str, before: str) -> str:
    """A new fact's id: the same in every process that saw the same ``before`` (the id of the
    subject's previous, deleted memory, or ""), so a fact deleted and stated anew gets a new id."""
    return "fact-" + hashlib.sha256(f"{key}\x1f{before}".encode()).hexdigest()[:24]


def _key(user_id: str, name: str) -> str:
    return f"{user_id}\x1f{name}"


def _named(value: dict[str, Any], where: str) -> list[Any]:
    """The memory ids a fact (``chunk_id``) or a conflict group (``ids``) names."""
    return ([value["chunk_id"]] if "chunk_id" in value else []) + list(sequence(value.get("ids", []), where))


def _name(what: str, value: Any) -> str:
    out = check_text(what, value)
    assert out is not None
    return out


class Facts:
    """Facts (one current version per subject), opinions and conflict groups."""

    def __init__(self, ctx: LifecycleContext) -> None:
        self.ctx = ctx
        # Captured statements (ingest) keep a bi-temporal timeline per subject; conflicts of
        # equal standing join this part's conflict groups.
        self.timeline = FactTimeline(ctx, self._join_group)

    # -- a user's data (UserData) ------------------------------------------------------------
    keeps = (FACTS, CONFLICTS)

    def export_user(self, user_id: str) -> dict[str, Any]:
        """``facts``: subject key -> ``{"chunk_id", "subject_key"}``; ``conflicts``: group ->
        ``{"ids": [...]}``."""
        return {"facts": user_entries(self.ctx.backend, FACTS, user_id),
                "conflicts": user_entries(self.ctx.backend, CONFLICTS, user_id)}

    def stage_import(self, user_id: str, data: Mapping[str, Any]) -> Staged:
        staged = Staged()
        for name, namespace in (("facts", FACTS), ("conflicts", CONFLICTS)):
            for entry, named in named_entries(data, name, namespace, user_id, _named):
                staged.kv.append(entry)
                staged.names.update(named)
        return staged

    # -- facts -------------------------------------------------------------------------------
    def remember_fact(self, subject_key: str, content: str, *, user_id: str, source: str | None = None,
                      metadata: Mapping[str, Any] | None = None, tags: Iterable[str] = (), **fields: Any) -> str:
        """Store the current value of a fact about ``subject_key`` (e.g. "home_city") and return
        the memory's id, the same id every time for one user and subject key.

        New content replaces the old (it is re-embedded and re-indexed, and its timestamp
        becomes now); the old state is kept in ``history(id)``. The same content again
        only refreshes the fields given. ``fields`` are those of :meth:`add` (session_id,
        agent_id, confidence, timestamp, summary, entities...).
        """
        _name("subject_key", subject_key)
        check_user(user_id)
        if isinstance(tags, str):
            raise InvalidInputError("tags must be a list of strings")
        md = dict(metadata or {})
        if source is not None:
            md["source"] = _name("source", source)
        key = _key(user_id, subject_key)
        with self.ctx.changes():
            entry = self.ctx.backend.kv_get(FACTS, key)
            current = self.ctx.backend.get([entry["chunk_id"]]).get(entry["chunk_id"]) if entry else None
            if current is None:
                # The id follows from user, subject and what was before, so two processes stating
                # a new fact at once make one memory: the later add is refused and revises it.
                cid = fields.pop("chunk_id", None) or _fact_id(key, entry["chunk_id"] if entry else "")
                try:
                    cid = self.ctx.records.add(content, user_id=user_id, tags=tags, chunk_id=cid,
                                               metadata=dict(md, kind="fact", fact_key=subject_key, version=1),
                                               **fields)
                except DuplicateIdError:
                    current = self.ctx.backend.get([cid]).get(cid)
                    if current is None or current.user_id != user_id:
                        raise
                self.ctx.backend.kv_put(FACTS, key, {"chunk_id": cid, "subject_key": subject_key}, user_id=user_id)
                if current is None:
                    return cid
            return self._revise_fact(current, content, md, list(tags), fields)

    def _revise_fact(self, current: KnowledgeChunk, content: str, md: dict[str, Any], tags: list[str],
                     fields: dict[str, Any]) -> str:
        changes: dict[str, Any] = dict(fields)
        if "content" in changes:
            raise InvalidInputError("pass the fact's content as the second argument")
        new_md = dict(current.metadata, **md)
        changes["tags"] = list(dict.fromkeys([*current.tags, *tags]))
        changes["status"] = ChunkStatus.ACTIVE  # a fact said again is current, even if it was archived
        if content != current.raw_content:
            changes.setdefault("timestamp", self.ctx.now())
            changes["raw_content"] = content
            # Rebuilt from raw_content: MemoryCore.update() re-embeds only when the indexed
            # text (processed_content) changes, and it keeps the old one when only raw_content
            # is given.
            changes["processed_content"] = None
            new_md["version"] = int(current.metadata.get("version", 1)) + 1
            new_md.pop(STALE_KEY, None)  # corrected content is no longer the stale one
            new_md[FEEDBACK_KEY] = dict(current.metadata.get(FEEDBACK_KEY) or {}, down_streak=0)
            if "expires_at" not in changes and current.metadata.get("expiry_rule"):
                probe = current.copy(raw_content=content, processed_content=None, expires_at=None,
                                     timestamp=changes["timestamp"], tags=changes["tags"])
                found = rule_expiry(probe, self.ctx.config.expiry_rules)
                changes["expires_at"] = found[0] if found else None
                if found:
                    new_md["expiry_rule"] = found[1]
                else:
                    new_md.pop("expiry_rule")
        changes["metadata"] = new_md
        if any(current.to_dict().get(k) != (v.value if hasattr(v, "value") else v) for k, v in changes.items()):
            # Validates first: bad input changes nothing. A new text keeps the old version.
            self.ctx.records.revise(current.id, changes, reason="fact_update")
        return current.id

    def fact(self, subject_key: str, *, user_id: str) -> KnowledgeChunk | None:
        """The current memory of a fact, or None if it was never remembered (or was deleted).
        A fact never given to ``remember_fact`` is the current statement captured from the
        user's own words (``timeline``), if any."""
        entry = self.ctx.backend.kv_get(FACTS, _key(check_user(user_id), _name("subject_key", subject_key)))
        if entry is None:
            return self.timeline.current(subject_key, user_id=user_id)
        return self.ctx.backend.get([entry["chunk_id"]]).get(entry["chunk_id"])

    def remembered(self, user_id: str) -> dict[str, KnowledgeChunk]:
        """A user's remembered facts: subject key -> its current memory."""
        entries = {k: v["chunk_id"] for k, v in user_entries(self.ctx.backend, FACTS, check_user(user_id)).items()
                   if isinstance(v, Mapping) and "chunk_id" in v}
        got = self.ctx.backend.get(list(entries.values()))
        return {key: got[cid] for key, cid in entries.items() if cid in got}

    def history(self, chunk_id: str) -> list[MemoryVersion]:
        """The earlier versions of a memory, oldest first (the current state is ``get(id)``).

        A version is written when an edit (``update``) changes the memory's text, when a
        fact gets new content and when duplicates are merged into the memory. Deleting the
        memory deletes its versions.
        """
        _name("chunk_id", chunk_id)
        versions = read_versions(self.ctx.backend, chunk_id)
        if not versions and not self.ctx.backend.contains([chunk_id]):
            raise NotFoundError(f"no chunk with id {chunk_id!r}")
        return versions

    # -- opinions and conflicts --------------------------------------------------------------
    def remember_opinion(self, content: str, *, user_id: str, topic: str, source: str | None = None,
                         confidence: float = 1.0, metadata: Mapping[str, Any] | None = None, **fields: Any) -> str:
        """Store one view on ``topic`` with its source and confidence; every view is kept.

        Two or more views on a topic form the conflict group ``"opinion:<topic>"``: search
        orders them by confidence, then recency, and :meth:`opinions` lists them so.
        """
        _name("topic", topic)
        md = dict(metadata or {}, kind="opinion", topic=topic)
        if source is not None:
            md["source"] = _name("source", source)
        with self.ctx.changes() as box:
            cid = self.ctx.records.add(content, user_id=user_id, metadata=md, confidence=confidence, **fields)
            self._join_group(user_id, f"opinion:{topic}", [cid], box)
        return cid

    def opinions(self, topic: str, *, user_id: str) -> list[KnowledgeChunk]:
        """The active views on ``topic``: highest confidence first, then newest."""
        return self.conflicts(f"opinion:{_name('topic', topic)}", user_id=user_id)

    def mark_conflict(self, chunk_ids: Iterable[str], *, group: str | None = None) -> str:
        """Mark memories of one user as conflicting (alternative answers to one question)
        and return the group's name (a new one unless ``group`` is given)."""
        ids = id_list(chunk_ids)
        group = _name("group", group) if group is not None else f"conflict:{new_id()[:12]}"
        with self.ctx.changes() as box:
            chunks = self.ctx.records.get_many(ids)
            if len(chunks) != len(ids):
                missing = sorted(set(ids) - {c.id for c in chunks})
                raise NotFoundError(f"no chunk with id {missing[0]!r}")
            if len(ids) < 2:
                raise InvalidInputError("a conflict needs at least two memories")
            users = {c.user_id for c in chunks}
            if len(users) > 1:
                raise InvalidInputError(f"conflicting memories must belong to one user, got {sorted(users)}")
            self._join_group(users.pop(), group, ids, box)
        return group

    def conflicts(self, group: str, *, user_id: str) -> list[KnowledgeChunk]:
        """The active members of a conflict group: highest confidence first, then newest."""
        entry = self.ctx.backend.kv_get(CONFLICTS, _key(check_user(user_id), _name("group", group))) or {}
        found = self.ctx.backend.get(entry.get("ids", []))
        members = [c for c in found.values() if c.status is ChunkStatus.ACTIVE]
        return sorted(members, key=conflict_order)

    def _join_group(self, user_id: str, group: str, ids: list[str], box: Any) -> None:
        key = _key(user_id, group)
        entry = self.ctx.backend.kv_get(CONFLICTS, key) or {"ids": []}
        existing = self.ctx.backend.get(list(dict.fromkeys([*entry["ids"], *ids])))
        self.ctx.backend.kv_put(CONFLICTS, key, {"ids": list(existing)}, user_id=user_id)
        if len(existing) < 2:
            return
        marked: list[KnowledgeChunk] = []

        def change(current: dict[str, KnowledgeChunk]) -> list[KnowledgeChunk]:
            # On the records as the write reads them: an edit another process made since they
            # were read above is kept.
            marked[:] = [c.copy(metadata=dict(c.metadata, **{GROUP_KEY: group}), relationships=[])
                         for c in current.values() if c.metadata.get(GROUP_KEY) != group]
            return marked

        self.ctx.backend.modify(list(existing), change)
        for c in marked:
            box.emit(EventType.UPDATED, c, fields=["metadata"], conflict_group=group)
