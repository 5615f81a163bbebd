"""One memory at a time: add, list, get, edit, delete, history, relationships; facts, hot
patterns and dead letters. A user-scoped API key sees its users' memories only: any other
id answers 404, exactly like an id that does not exist."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, Query

from ..errors import InvalidInputError
from ..ids import event_key, user_tag
from ..records import KnowledgeChunk, new_id
from .auth import hidden
from .deps import CONFLICT, ERRORS, NOT_FOUND, Ctx, ctx
from .errors import segment
from .observe import note
from .schemas import (
    ChunkOut,
    DeadLettersOut,
    DeletedOut,
    FactsOut,
    HistoryOut,
    HotPatternsOut,
    LineageOut,
    MemoryIn,
    MemoryPageOut,
    MemoryPatch,
    RelateIn,
    RelationshipOut,
    RelationshipsOut,
    RetriedOut,
    RetryIn,
)

__all__ = ["memories_router"]



def _str() -> Any:
    return Query(None, min_length=1, max_length=512)  # a new one per parameter: FastAPI binds it to its name


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "value") and isinstance(value.value, str):
        return value.value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _owned(c: Ctx, memory_id: str, *, reads: bool = False) -> KnowledgeChunk:
    """The memory of a path's id that the key may edit (``reads``: read); else 404 (``Ctx.memories``)."""
    mid = segment(memory_id)
    return c.memories([mid], reads=reads)[mid]


def _dead_json(d: Any) -> dict[str, Any]:
    return {"event": d.event.to_dict(), "error": d.error, "attempts": d.attempts, "failed_at": d.failed_at.isoformat()}


def memories_router() -> APIRouter:
    r = APIRouter(prefix="/api/v1", responses=ERRORS)

    @r.post("/memories", status_code=201, response_model=ChunkOut, tags=["memories"],
            responses=CONFLICT, summary="Add one memory (redacted and admitted like an ingested one)")
    def add(req: MemoryIn, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        c.access.may_write(req.user_id)
        record = req.to_record()
        if c.access.users is not None and req.id is not None:
            held = c.svc.memory.get_many([req.id])
            c.access.may_choose(req.id, req.user_id, held[0].user_id if held else None)
        elif c.access.users is not None:  # in its user's name too, so the key's export imports back
            record["chunk_id"] = f"{new_id()}@{user_tag(req.user_id)}"
        chunk = c.svc.add_memory(record)
        note(c.request, memory_id=chunk.id)
        return chunk.to_dict()

    @r.get("/memories", response_model=MemoryPageOut, tags=["memories"],
           responses=NOT_FOUND, summary="List memories oldest first, filtered, a page at a time (pass next_cursor back as cursor)")
    def list_(user_id: str | None = _str(), agent_id: str | None = _str(), session_id: str | None = _str(),
              tags: list[str] | None = Query(None, max_length=100, description="Any of these tags."),
              status: list[str] | None = Query(None, max_length=5, description="Default: every status."),
              type: list[str] | None = Query(None, max_length=3, description="Content types: text, code, data."),
              since: str | None = Query(None, max_length=64), until: str | None = Query(None, max_length=64),
              metadata: str | None = Query(None, max_length=4000,
                                              description='JSON object of metadata values, e.g. {"category": "code"}.'),
              limit: int = Query(50, ge=1, le=1000), cursor: str | None = Query(None, max_length=2000),
              c: Ctx = Depends(ctx)) -> dict[str, Any]:
        filters: dict[str, Any] = {k: v for k, v in (("agent_id", agent_id), ("session_id", session_id),
                                                     ("tags", tags), ("status", status), ("type", type),
                                                     ("since", since),
                                                     ("until", until)) if v is not None}
        wanted = None
        if metadata is not None:
            try:
                wanted = json.loads(metadata)
            except ValueError:
                raise InvalidInputError("metadata must be a JSON object") from None
            if not isinstance(wanted, dict):
                raise InvalidInputError("metadata must be a JSON object")
        scope = c.access.scope(user_id)
        if isinstance(scope, list):
            filters["user_id"] = scope
            scope = None
        page = c.svc.list_memories(filters=filters, user_id=scope, metadata=wanted, limit=limit, cursor=cursor)
        note(c.request, results=len(page.items))
        return {"memories": [m.to_dict() for m in page.items], "next_cursor": page.next_cursor}

    @r.get("/memories/{memory_id}", response_model=ChunkOut, tags=["memories"], responses=NOT_FOUND,
           summary="One memory")
    def get(memory_id: str, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        # shared knowledge the key reads too (a search returned its id); edits stay the owners'
        return _owned(c, memory_id, reads=True).to_dict()

    @r.patch("/memories/{memory_id}", response_model=ChunkOut, tags=["memories"], responses=NOT_FOUND,
             summary="Edit a memory: content, tags, pinned, expires_at, confidence, status, metadata...")
    def patch(memory_id: str, req: MemoryPatch, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        chunk = _owned(c, memory_id)
        return c.svc.update_memory(chunk.id, req.changes()).to_dict()

    @r.delete("/memories/{memory_id}", response_model=DeletedOut, tags=["memories"], responses=NOT_FOUND,
              summary="Delete a memory with its index entries and relationships")
    def delete(memory_id: str, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        chunk = _owned(c, memory_id)
        return {"id": chunk.id, "deleted": c.svc.delete_memory(chunk.id)}

    @r.get("/memories/{memory_id}/history", response_model=HistoryOut, tags=["memories"], responses=NOT_FOUND,
           summary="Earlier versions of a memory, oldest first")
    def history(memory_id: str, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        mid = segment(memory_id)
        versions = c.svc.history(mid)
        if c.access.users is not None:  # nothing to show and another user's: one answer (hidden)
            present = c.svc.memory.get_many([mid])
            owners = {v.chunk.user_id for v in versions} | {p.user_id for p in present}
            if not owners or not all(c.access.allows(u) for u in owners):
                raise hidden(mid)
        return {"id": mid, "versions": [{"seq": v.seq, "chunk": v.chunk.to_dict(),
                                         "replaced_at": v.replaced_at.isoformat(), "reason": v.reason}
                                        for v in versions]}

    @r.get("/memories/{memory_id}/lineage", response_model=LineageOut, tags=["memories"], responses=NOT_FOUND,
           summary="Where a memory came from: events, agents, tools, merges, edits, feedback, relations")
    def lineage(memory_id: str, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        chunk = _owned(c, memory_id)
        return c.svc.lineage(chunk.id).to_dict()

    @r.get("/memories/{memory_id}/relationships", response_model=RelationshipsOut, tags=["memories"],
           responses=NOT_FOUND, summary="Edges touching a memory")
    def relationships(memory_id: str, direction: str = Query("both", pattern="^(in|out|both)$"),
                      type: list[str] | None = Query(None, max_length=20), c: Ctx = Depends(ctx)) -> dict[str, Any]:
        chunk = _owned(c, memory_id)
        edges = c.svc.relationships(chunk.id, types=type, direction=direction)
        if c.access.users is not None:  # an edge to another user's memory would reveal its id
            others = {e.target_id if e.source_id == chunk.id else e.source_id for e in edges}
            visible = {x.id for x in c.svc.memory.get_many(sorted(others)) if c.access.allows(x.user_id)}
            edges = [e for e in edges if (e.target_id if e.source_id == chunk.id else e.source_id) in visible]
        return {"id": chunk.id, "relationships": [e.to_dict() for e in edges]}

    @r.post("/relationships", status_code=201, response_model=RelationshipOut, tags=["memories"],
            responses=NOT_FOUND, summary="Add a typed edge between two memories")
    def relate(req: RelateIn, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        c.memories([req.source_id, req.target_id])
        rel = c.svc.relate(req.source_id, req.target_id, req.type, weight=req.weight, note=req.note)
        return rel.to_dict() if hasattr(rel, "to_dict") else _plain(asdict(rel))

    @r.get("/users/{user_id}/facts", response_model=FactsOut, tags=["users"], responses=NOT_FOUND, summary="A user's current facts")
    def facts(user_id: str, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        user = segment(user_id)
        c.access.user(user)
        return {"user_id": user, "facts": {k: v.to_dict() for k, v in c.svc.facts(user).items()}}

    @r.get("/patterns/hot", response_model=HotPatternsOut, tags=["patterns"],
           responses=NOT_FOUND, summary="Recurring questions that are hot now, most asked first")
    def hot(user_id: str | None = _str(), c: Ctx = Depends(ctx)) -> dict[str, Any]:
        found = [p for p in c.svc.hot_patterns(user_id=c.access.user(user_id)) if c.access.allows(p.user_id)]
        return {"patterns": [_plain(vars(p)) for p in found]}

    @r.get("/dead-letters", response_model=DeadLettersOut, tags=["ingest"],
           responses=NOT_FOUND, summary="Events whose processing failed, oldest first, with their errors")
    def dead(user_id: str | None = _str(), limit: int = Query(100, ge=1, le=10_000),
             c: Ctx = Depends(ctx)) -> dict[str, Any]:
        user = c.access.user(user_id)
        found = [d for d in c.svc.dead_letters(limit=None if c.access.users is not None else limit, user_id=user)
                 if c.access.allows(d.event.user_id)][:limit]
        return {"dead_letters": [_dead_json(d) for d in found]}

    @r.post("/dead-letters/retry", response_model=RetriedOut, tags=["ingest"],
            summary="Queue dead events again (the given event ids, or all)")
    def retry(req: RetryIn, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        ids = req.ids
        if c.access.users is not None:
            # By queue key (event id and user): another user's dead event of the same id stays.
            ids = sorted(event_key(d.event.id, d.event.user_id) for d in c.svc.dead_letters()
                         if c.access.allows(d.event.user_id) and (ids is None or d.event.id in ids))
            if not ids:
                return {"retried": 0}
        return {"retried": c.svc.retry_dead_letters(ids)}

    return r
