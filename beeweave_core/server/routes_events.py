"""The design document's search contract, and memory events as Server-Sent Events."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse

from ..errors import InvalidInputError
from ..events import EventType
from ..records import KnowledgeChunk
from .config import ServerConfig
from .deps import ERRORS, NOT_FOUND, Ctx, ctx, unlimited_ctx
from .event_log import EventFilter, filter_from
from .fanout import follow, frames
from .routes_core import search_hits
from .schemas import DeletedOut, SemanticSearchIn, SemanticSearchOut, WatchesOut, WatchIn, WatchOut

__all__ = ["events_router", "design_result"]

_TYPES = "|".join(t.value for t in EventType)
_KNOWN = {t.value for t in EventType}
_N_TYPES = len(EventType)

_MAX_SEQ = 2**63 - 1  # the event log's ids are SQLite integers
_SEQ = re.compile(r"[0-9]{1,19}")  # ASCII digits only, at most as many as _MAX_SEQ has


def resume_after(after: int | None = Query(None, ge=0, le=_MAX_SEQ, description="Resume after this id."),
                 last_event_id: str | None = Header(None, max_length=32)) -> int | None:
    """Where a stream resumes: ``after``, else the ``Last-Event-ID`` a reconnecting client
    sends. Checked as a dependency, so a bad id is refused before the stream starts: the
    server only sends ids of ASCII digits, so anything else (``abc``, ``-1``, ``²``, which
    ``str.isdigit()`` takes and ``int()`` does not) is not one of its ids. An empty header
    is no id."""
    if after is not None or last_event_id is None or not last_event_id.strip():
        return after
    value = last_event_id.strip()
    if _SEQ.fullmatch(value) is None or int(value) > _MAX_SEQ:
        raise InvalidInputError(f"Last-Event-ID {value!r} is not an event id of this server")
    return int(value)


def design_result(chunk: KnowledgeChunk, score: float) -> dict[str, Any]:
    """A hit the way the design document's client reads it: ``query`` and ``agent_response``.

    A turn memory is split where its question ends (``metadata.ingest.query_chars``); any
    other memory has its summary as ``query`` (or "") and its text as ``agent_response``.
    """
    text = chunk.raw_content
    info = chunk.metadata.get("ingest") if isinstance(chunk.metadata.get("ingest"), dict) else {}
    n = info.get("query_chars") if isinstance(info, dict) else None
    if isinstance(n, int) and 0 < n <= len(text):
        query, answer = text[:n], text[n:].lstrip("\n")
    else:
        query, answer = chunk.summary or "", text
    return {"id": chunk.id, "query": query, "agent_response": answer, "score": score,
            "session_id": chunk.session_id, "user_id": chunk.user_id, "tags": list(chunk.tags),
            "timestamp": chunk.timestamp.isoformat(), "metadata": chunk.metadata}


def events_router(config: ServerConfig) -> APIRouter:
    r = APIRouter(prefix="/api/v1", responses=ERRORS)

    @r.post("/search/semantic", response_model=SemanticSearchOut, tags=["search"],
            responses=NOT_FOUND, summary="The design document's search: {query, session_id, user_id, top_k, tags} -> {results}")
    def semantic(req: SemanticSearchIn, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        filters: dict[str, Any] = {}
        if req.session_id is not None:
            filters["session_id"] = req.session_id
        if req.tags:
            filters["tags"] = req.tags
        hits, took = search_hits(c, config, req.query, k=req.top_k, user_id=req.user_id, filters=filters or None)
        return {"results": [design_result(h.chunk, h.score) for h in hits], "took_ms": round(took * 1000, 3)}

    def watch_out(w: Any) -> dict[str, Any]:
        return {"id": w.id, "query": w.query, "user_id": w.user_id, "agent_id": w.agent_id,
                "min_relevance": w.min_relevance, "fired": w.fired}

    @r.post("/watches", status_code=201, response_model=WatchOut, tags=["events"],
            summary="A standing query: new or updated memories that match it emit watch.matched events")
    def add_watch(req: WatchIn, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        user = c.access.may_write(req.user_id)
        return watch_out(c.svc.memory.watch(req.query, user_id=user, agent_id=req.agent_id,
                                            min_relevance=req.min_relevance))

    @r.get("/watches", response_model=WatchesOut, tags=["events"], summary="The standing queries of this tenant")
    def list_watches(c: Ctx = Depends(ctx)) -> dict[str, Any]:
        return {"watches": [watch_out(w) for w in c.svc.memory.watches() if c.access.allows(w.user_id)]}

    @r.delete("/watches/{watch_id}", response_model=DeletedOut, tags=["events"], summary="End a standing query")
    def delete_watch(watch_id: str, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        found = [w for w in c.svc.memory.watches() if w.id == watch_id and c.access.allows(w.user_id)]
        return {"id": watch_id, "deleted": bool(found) and c.svc.memory.unwatch(watch_id)}

    def sse_filter(type: list[str] | None = Query(None, max_length=_N_TYPES, description=_TYPES),
                   tag: list[str] | None = Query(None, max_length=100, description="Any of these tags."),
                   user_id: str | None = Query(None, min_length=1, max_length=512),
                   agent_id: str | None = Query(None, min_length=1, max_length=512),
                   c: Ctx = Depends(unlimited_ctx)) -> tuple[Ctx, EventFilter]:
        # Checked before the stream starts, so a bad filter is a plain 400.
        for t in type or ():
            if t not in _KNOWN:
                raise InvalidInputError(f"unknown event type {t!r}; known: {', '.join(sorted(_KNOWN))}")
        user = c.access.user(user_id)
        return c, filter_from(type, tag, user, agent_id, None if c.access.users is None else c.access.users)

    @r.get("/events", response_class=StreamingResponse, tags=["events"],
           responses={**NOT_FOUND, 200: {"content": {"text/event-stream": {}},
                                         "description": "The events, one SSE message each (event, data, id)"}},
           summary="Memory events as Server-Sent Events (resume with Last-Event-ID)")
    async def events(request: Request,
                     max_seconds: float | None = Query(None, gt=0, le=86_400,
                                                          description="End the stream after this long (long polling)."),
                     start: int | None = Depends(resume_after),
                     args: tuple[Ctx, EventFilter] = Depends(sse_filter)) -> StreamingResponse:
        c, flt = args
        log = c.svc.event_log
        start_seq = log.last_seq() if start is None else start
        loop = asyncio.get_running_loop()
        end = None if max_seconds is None else loop.time() + max_seconds
        # The wire format is written by fanout.frames (one write per batch of events), not by
        # FastAPI's SSE support; the response is the same text/event-stream.
        body = frames(follow(log, start_seq, flt, gone=request.is_disconnected, end=end))
        return StreamingResponse(body, media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    return r
