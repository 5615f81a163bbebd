"""Durable records of change: past versions of a memory and the lifecycle's own actions.

Both are ordered logs in the store (``log_append``), tagged with the user so that
``delete_user`` forgets them too:
- ``lifecycle.versions``: a memory's full state just before new content replaced it (an
  edit, a fact's new value) or duplicates were folded into it (``history()``); deleted with
  the memory;
- ``lifecycle.audit``: what maintenance did to a memory and why (merged, archived,
  deleted; expired, evicted, duplicate), so nothing disappears without a record.

:class:`History` hands both over in a user's export and takes them back.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..errors import InvalidInputError
from ..records import KnowledgeChunk, to_datetime
from ..store.base import StoreBackend
from ..user_data import Staged, chunk_of, mapping, same, section, time_of
from ..validation import check_id
from .reports import MemoryVersion

__all__ = ["VERSIONS", "AUDIT", "History", "record_version", "forget_versions", "read_versions", "record_action",
           "read_actions"]

VERSIONS = "lifecycle.versions"
AUDIT = "lifecycle.audit"


def record_version(backend: StoreBackend, chunk: KnowledgeChunk, reason: str, now: datetime) -> int:
    state = chunk.to_dict()
    state.pop("relationships")  # edges are not part of a version; the audit log has moved ones
    return backend.log_append(VERSIONS, chunk.id, {"reason": reason, "at": now.isoformat(), "chunk": state},
                              user_id=chunk.user_id)


def forget_versions(backend: StoreBackend, chunk_ids: list[str]) -> None:
    """Delete the versions of deleted memories: what a person deleted must not stay readable
    in an earlier version (the audit log keeps what maintenance did, without the text)."""
    if chunk_ids:
        backend.log_delete(VERSIONS, chunk_ids)


def read_versions(backend: StoreBackend, chunk_id: str) -> list[MemoryVersion]:
    return [MemoryVersion(seq, KnowledgeChunk.from_dict(v["chunk"]), to_datetime(v["at"]), v["reason"])
            for seq, _, v in backend.log_read(VERSIONS, chunk_id)]


def record_action(backend: StoreBackend, chunk: KnowledgeChunk, action: str, reason: str, now: datetime,
                  **details: Any) -> None:
    # The user is in the entry too: it outlives the memory, and a user's export finds it by them.
    backend.log_append(AUDIT, chunk.id, {"action": action, "reason": reason, "at": now.isoformat(),
                                         "user_id": chunk.user_id, **details}, user_id=chunk.user_id)


def read_actions(backend: StoreBackend, chunk_id: str | None = None) -> list[dict[str, Any]]:
    return [dict(v, chunk_id=key, seq=seq) for seq, key, v in backend.log_read(AUDIT, chunk_id)]


class History:
    """A user's versions and audit entries in their export (``UserData``): ``versions`` (each
    with the memory's state, also of deleted memories' merged duplicates) and ``audit`` (also
    of deleted memories: the entries outlive them), oldest first, each with its ``chunk_id``
    and its ``seq`` in the source store (a position the importing store gives anew)."""

    keeps = (VERSIONS, AUDIT)

    def __init__(self, backend: StoreBackend) -> None:
        self.backend = backend

    def export_user(self, user_id: str) -> dict[str, Any]:
        # Read by the user they were logged with: one user's entries, also of deleted memories.
        versions = [{"seq": seq, "chunk_id": key, **v} for seq, key, v in self.backend.log_read(VERSIONS, user_id=user_id)
                    if v.get("chunk", {}).get("user_id") == user_id]
        audit = [dict(v, chunk_id=key, seq=seq) for seq, key, v in self.backend.log_read(AUDIT, user_id=user_id)]
        return {"versions": versions, "audit": audit}

    def stage_import(self, user_id: str, data: Mapping[str, Any]) -> Staged:
        logs: dict[str, list[tuple[str, dict[str, Any]]]] = {VERSIONS: [], AUDIT: []}
        for i, raw in enumerate(section(data, "versions", list)):
            v = mapping(raw, f"versions[{i}]")
            key = check_id(v.pop("chunk_id", None), f"versions[{i}].chunk_id")
            v.pop("seq", None)  # the source store's position; the log gives its own
            if chunk_of(mapping(v.get("chunk"), f"versions[{i}].chunk"), f"versions[{i}].chunk", user_id).id != key:
                raise InvalidInputError(f"versions[{i}] is filed under {key!r} but holds another memory")
            time_of(v.get("at"), f"versions[{i}].at")
            logs[VERSIONS].append((key, v))
        for i, raw in enumerate(section(data, "audit", list)):
            a = mapping(raw, f"audit[{i}]")
            key = check_id(a.pop("chunk_id", None), f"audit[{i}].chunk_id")
            a.pop("seq", None)
            time_of(a.get("at"), f"audit[{i}].at")
            logs[AUDIT].append((key, a))

        def write() -> dict[str, int]:
            counts = {}
            for stream, entries in logs.items():
                # Entries already in the log (a repeated import, also of a memory deleted since)
                # are not written twice.
                seen = {(k, same(v)) for k in {k for k, _ in entries} for _, k, v in self.backend.log_read(stream, k)}
                todo = [(k, v) for k, v in entries if (k, same(v)) not in seen]
                for key, value in todo:
                    self.backend.log_append(stream, key, value, user_id=user_id)
                counts["versions" if stream == VERSIONS else "audit"] = len(todo)
            return counts

        return Staged(names={k for entries in logs.values() for k, _ in entries}, write=write)
