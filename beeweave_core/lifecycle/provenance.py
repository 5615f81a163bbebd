"""Provenance: where a memory came from and what happened to it since (``lineage(id)``).

Read from what the engine already records: the ingest metadata (event, role, tools), the
agents and sources of the memories merged into it, its version history and audit log, its
feedback counts, the typed relations callers recorded (with their notes), and its code
validity (``paths``/``commit`` and a pending "verify" mark).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..engine.graph import NOTES
from ..errors import NotFoundError
from ..records import USER_RELATIONS, RelationType
from ..validation import check_id
from .base import LifecycleContext
from .feedback import FEEDBACK_KEY
from .history import read_actions, read_versions
from .validity import code_paths

__all__ = ["Lineage", "Provenance"]


@dataclass(frozen=True)
class Lineage:
    """A memory's provenance.

    Attributes:
        id, user_id: the memory.
        agents: the agents that wrote it or a memory merged into it.
        events: the ingested events it (or a merged memory) came from.
        tools: the tools whose output it holds or that ran in its turn.
        sources: the ``source`` values of it and of the memories merged into it.
        merged_from: the memories folded into it ({id, timestamp, agent_id, session_id, source}).
        merged_into: the memory it was folded into, if any.
        edits: its earlier versions ({seq, reason, at}), oldest first.
        actions: what the lifecycle did to it (merged, archived, deleted...), oldest first.
        feedback: its feedback counts (used, up, down).
        relations: typed relations in both directions ({type, direction, other, weight, note}).
        code: its ``paths``, ``commit`` and ``verify`` mark, when it is about code.
    """

    id: str
    user_id: str
    agents: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    sources: list[Any] = field(default_factory=list)
    merged_from: list[dict[str, Any]] = field(default_factory=list)
    merged_into: str | None = None
    edits: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    feedback: dict[str, Any] = field(default_factory=dict)
    relations: list[dict[str, Any]] = field(default_factory=list)
    code: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _unique(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if v is not None and v not in out:
            out.append(v)
    return out


class Provenance:
    """Builds :class:`Lineage` from the store."""

    def __init__(self, ctx: LifecycleContext) -> None:
        self.ctx = ctx

    def lineage(self, chunk_id: str) -> Lineage:
        check_id(chunk_id)
        backend = self.ctx.backend
        c = backend.get([chunk_id]).get(chunk_id)
        if c is None:
            raise NotFoundError(f"no chunk with id {chunk_id!r}")
        md = c.metadata
        ingest = md.get("ingest") or {}
        merged = [m for m in md.get("merged_from") or [] if isinstance(m, dict)]
        merged_ids = [m.get("id") for m in merged if m.get("id")]
        merged_chunks = backend.get(merged_ids) if merged_ids else {}
        tools = [*(ingest.get("tools") or []), ingest.get("tool")]
        events = [ingest.get("event_id")]
        for m in merged_chunks.values():
            mi = m.metadata.get("ingest") or {}
            events.append(mi.get("event_id"))
            tools += [*(mi.get("tools") or []), mi.get("tool")]
        kinds = [t.value for t in sorted(USER_RELATIONS, key=lambda t: t.value)] + [RelationType.MERGED_INTO.value]
        relations = []
        for e in backend.edges([c.id], types=kinds, direction="both"):
            out = e.source_id == c.id
            entry = backend.kv_get(NOTES, f"{e.source_id}\x1f{e.target_id}\x1f{e.type.value}")
            relations.append({"type": e.type.value, "direction": "out" if out else "in",
                              "other": e.target_id if out else e.source_id, "weight": e.weight,
                              "note": None if entry is None else entry.get("note")})
        relations.sort(key=lambda r: (r["type"], r["direction"], r["other"]))
        code = None
        if md.get("paths") or md.get("path") or md.get("commit") or md.get("verify"):
            code = {"paths": code_paths(c),
                    "commit": md.get("commit"), "verify": md.get("verify")}
        return Lineage(
            id=c.id, user_id=c.user_id,
            agents=_unique([c.agent_id, *(m.get("agent_id") for m in merged)]),
            events=_unique(events), tools=_unique(tools),
            sources=_unique([md.get("source"), *(md.get("sources") or []), *(m.get("source") for m in merged)]),
            merged_from=[{k: m.get(k) for k in ("id", "timestamp", "agent_id", "session_id", "source")} for m in merged],
            merged_into=md.get("merged_into"),
            edits=[{"seq": v.seq, "reason": v.reason, "at": v.replaced_at.isoformat()}
                   for v in read_versions(backend, c.id)],
            actions=read_actions(backend, c.id),
            feedback={k: v for k, v in (md.get(FEEDBACK_KEY) or {}).items() if k != "down_streak"},
            relations=relations, code=code)
