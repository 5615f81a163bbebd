"""Ingest, flush, search, feedback, trace, users (export/forget), review, maintain, stats."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fastapi import APIRouter, Depends, Query
from starlette.concurrency import run_in_threadpool

from ..errors import InvalidInputError, NotFoundError
from ..lifecycle.reports import MaintenanceReport
from ..network import ExpandOptions
from ..user_export import ExportPlan
from .auth import Access, access_of
from .config import ServerConfig
from .deps import ERRORS, NOT_FOUND, Ctx, chunks_json, ctx, unlimited_ctx
from .errors import segment
from .observe import note
from .schemas import (
    AccessOut,
    ChunksOut,
    DecideIn,
    EventIn,
    ExportOut,
    FeedbackIn,
    FieldsIn,
    FieldsOut,
    FlushOut,
    ForgetOut,
    IdsIn,
    IdsOut,
    ImportCheckOut,
    ImportOut,
    IngestAccepted,
    RejectIn,
    ResolveIn,
    ReviewOut,
    ReviewQueueOut,
    SearchIn,
    SearchOut,
    StatsOut,
    TraceOut,
)
from .service import MemoryService, review_dict

__all__ = ["core_router", "wait_drained", "search_hits"]



def _user_q() -> Any:
    return Query(None, min_length=1, max_length=512)  # a new one per route: FastAPI binds it to its parameter


async def wait_drained(svc: MemoryService, timeout: float) -> bool:
    """Wait for the tenant's queue to drain without holding a worker thread for the wait:
    each check is a short ``flush(0)`` in the thread pool, the pauses are in the event loop."""
    deadline = time.monotonic() + timeout
    pause = 0.01
    while True:
        if await run_in_threadpool(svc.flush, 0):
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, 0.2)


def search_hits(c: Ctx, config: ServerConfig, query: str, *, k: int, user_id: str | None,
                filters: dict[str, Any] | None = None, scopes: list[str] | None = None,
                **kwargs: Any) -> tuple[list[Any], float]:
    if k > config.max_k:
        raise InvalidInputError(f"k may be at most {config.max_k} on this server, got {k}")
    t0 = time.perf_counter()
    hits = c.svc.search(query, user_id=c.access.scope(user_id), k=k, filters=filters,
                        scopes=c.access.search_scopes(scopes), **kwargs)
    took = time.perf_counter() - t0
    metrics = getattr(c.request.app.state, "metrics", None)
    if metrics is not None:
        metrics.search.labels(c.access.tenant).observe(took)
    note(c.request, k=k, user_id=user_id, filters=filters, results=len(hits),
         model=getattr(getattr(c.svc.memory, "embedder", None), "name", None))
    return hits, took


def _owned_ids(c: Ctx, ids: list[str]) -> list[str]:
    """The ids, after checking a user-scoped key sees every one: a missing id and another
    user's get one answer (``hidden``), whatever the route."""
    if c.access.users is not None:
        c.memories(ids)
    return ids


def core_router(config: ServerConfig) -> APIRouter:
    r = APIRouter(prefix="/api/v1", responses=ERRORS)

    @r.get("/me", response_model=AccessOut, tags=["auth"],
           summary="What this API key may do: its tenant, its users (null: all) and whether it is an admin key")
    def me(access: Access = Depends(access_of)) -> dict[str, Any]:
        return {"tenant": access.tenant, "users": None if access.users is None else sorted(access.users),
                "admin": access.admin}

    @r.post("/ingest", status_code=202, response_model=IngestAccepted, tags=["ingest"],
            summary="Queue a knowledge event (durable; processed in the background)")
    def ingest(event: EventIn, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        c.access.may_write(event.user_id)
        eid = c.svc.ingest(event.to_event())
        note(c.request, event_id=eid, user_id=event.user_id)
        return {"id": eid, "status": "queued"}

    @r.post("/flush", response_model=FlushOut, tags=["ingest"],
            summary="Wait (at most the server's max_flush_timeout) until the tenant's queued events are processed")
    async def flush(timeout: float = Query(10.0, ge=0), c: Ctx = Depends(unlimited_ctx)) -> dict[str, Any]:
        # A longer wait is capped, not refused: "drained" says whether the queue emptied in
        # time, and a client with more time calls again (BeeWeaveClient.flush does).
        drained = await wait_drained(c.svc, min(timeout, config.max_flush_timeout))
        if drained:
            await run_in_threadpool(c.svc.recorder.flush)
        return {"drained": drained, "pending": await run_in_threadpool(c.svc.memory.pending_events)}

    @r.post("/search", response_model=SearchOut, tags=["search"],
            responses=NOT_FOUND, summary="Hybrid search with filters, graph expansion and MMR")
    def search(req: SearchIn, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        expand: Any = req.expand
        if req.expand is not None and not isinstance(req.expand, bool):
            e = req.expand
            expand = ExpandOptions(hops=e.hops, decay=e.decay, limit=e.limit,
                                   edge_types=None if e.edge_types is None else tuple(t.value for t in e.edge_types))
        hits, took = search_hits(c, config, req.query, k=req.k, user_id=req.user_id,
                                 filters=req.filters.to_engine() if req.filters is not None else None,
                                 fusion=req.fusion, min_score=req.min_score, min_relevance=req.min_relevance,
                                 abstain_below=req.abstain_below,
                                 expand=expand, mmr=req.mmr,
                                 loosen=req.loosen, query_embedding=req.query_embedding, as_of=req.as_of,
                                 scopes=req.scopes)
        return {"hits": [h.to_dict() for h in hits], "took_ms": round(took * 1000, 3)}

    @r.post("/feedback", response_model=ChunksOut, tags=["feedback"], responses=NOT_FOUND,
            summary='Tell the memory how its memories did: "used", "up" or "down"')
    def feedback(req: FeedbackIn, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        if c.access.users is not None:  # also on shared knowledge the key reads: its searches return it
            c.memories(req.chunk_ids, reads=True)
        return chunks_json(c.svc.feedback(req.chunk_ids, req.signal.value))

    @r.get("/sessions/{session_id}/trace", response_model=TraceOut, tags=["sessions"],
           summary="Every memory of a session (any status), oldest first")
    def trace(session_id: str, user_id: str | None = _user_q(), c: Ctx = Depends(ctx)) -> dict[str, Any]:
        sid = segment(session_id)
        found = c.svc.trace(sid, user_id=c.access.user(user_id))
        found = [ch for ch in found if c.access.allows(ch.user_id)]
        note(c.request, results=len(found))
        return {"session_id": sid, **chunks_json(found)}

    @r.get("/users/{user_id}/export", response_model=ExportOut, tags=["users"], responses=NOT_FOUND,
           summary="All of a user's data as JSON (admin key)")
    def export(user_id: str, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        user = segment(user_id)
        c.access.must_admin("export")
        c.access.user(user)
        data = c.svc.export_user(user)
        if c.svc.export_is_empty(data):
            raise NotFoundError(f"no data of user {user!r}")
        return data

    def admitted(user_id: str, data: dict[str, Any], c: Ctx) -> ExportPlan:
        """The export, checked without reading the store and for this key's access."""
        user = segment(user_id)
        c.access.must_admin("import")
        c.access.user(user)
        if data.get("user_id") != user:
            raise InvalidInputError(f"the export is of user {data.get('user_id')!r}, not {user!r}")
        plan = c.svc.check_export(data)
        if c.access.users is not None:  # only ids no other user can hold: see Access.may_choose
            ids = plan.memory_ids()
            held = {ch.id: ch.user_id for ch in c.svc.memory.get_many(ids)}
            for cid in ids:
                c.access.may_choose(cid, user, held.get(cid))
        return plan

    @r.post("/users/{user_id}/import", response_model=ImportOut, tags=["users"],
            summary="Write a user's export back: memories as they were, relationships, history (admin key)")
    def import_(user_id: str, data: dict[str, Any], c: Ctx = Depends(ctx)) -> dict[str, Any]:
        return c.svc.import_user(admitted(user_id, data, c)).to_dict()

    @r.post("/users/{user_id}/import/check", response_model=ImportCheckOut, tags=["users"],
            summary="Check a user's export as an import would, writing nothing (admin key)")
    def import_check(user_id: str, data: dict[str, Any], c: Ctx = Depends(ctx)) -> dict[str, Any]:
        # A client importing several files asks this for each before writing any, so a file
        # the server refuses leaves nothing of the others written (``beeweave import``).
        c.svc.check_import(admitted(user_id, data, c))
        return {"user_id": segment(user_id), "checked": True}

    @r.delete("/users/{user_id}", response_model=ForgetOut, tags=["users"],
              responses=NOT_FOUND, summary="Forget everything of a user: records, index entries, relationships, history (admin key)")
    async def forget(user_id: str, c: Ctx = Depends(unlimited_ctx)) -> dict[str, Any]:
        user = segment(user_id)
        c.access.must_admin("forget")
        c.access.user(user)
        await wait_drained(c.svc, c.svc.forget_timeout)  # queued events of the user would come back
        return {"user_id": user, "deleted": await run_in_threadpool(c.svc.forget_user, user, 0.0)}

    @r.get("/review", response_model=ReviewOut, tags=["review"],
           summary='Memories waiting for a decision, oldest first, with their reasons: "pending" (held by the '
                   'admission rules), "stale", "expired", "verify", "fact_conflict" (flagged by the lifecycle)')
    def review(user_id: str | None = _user_q(), agent_id: str | None = Query(None, min_length=1, max_length=512),
               limit: int = Query(100, ge=0, le=1000),
               reason: list[str] | None = Query(
                   None, description="only memories waiting for this reason (repeatable): pending, stale, "
                                     "expired, verify, fact_conflict"),
               c: Ctx = Depends(ctx)) -> dict[str, Any]:
        items = c.svc.review(user_id=c.access.user(user_id), agent_id=agent_id, limit=limit, reasons=reason)
        return {"items": [review_dict(i) for i in items if c.access.allows(i.user_id)]}

    @r.post("/review/decide", response_model=IdsOut, tags=["review"], responses=NOT_FOUND,
            summary='Decide on memories waiting for review: "keep" (approve a pending one), "delete" (reject a '
                    'pending one, with reason) or "archive" (flagged ones); returns the ids decided')
    def decide(req: DecideIn, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        return {"ids": c.svc.decide(_owned_ids(c, req.ids), req.decision.value, reason=req.reason)}

    # Deprecated (issue 45): the two flows GET /review and POST /review/decide replace, kept for old clients.
    @r.get("/review/pending", response_model=ChunksOut, tags=["review"], deprecated=True,
           summary="Deprecated: GET /review?reason=pending. Memories waiting for review, oldest first")
    def pending(user_id: str | None = _user_q(), agent_id: str | None = Query(None, min_length=1, max_length=512),
                limit: int = Query(100, ge=0, le=1000), c: Ctx = Depends(ctx)) -> dict[str, Any]:
        return chunks_json(c.svc.pending(user_id=c.access.one_user(user_id), agent_id=agent_id, limit=limit))

    @r.post("/review/approve", response_model=IdsOut, tags=["review"], responses=NOT_FOUND, deprecated=True,
            summary='Deprecated: POST /review/decide "keep". Make pending memories active; returns the ids that changed')
    def approve(req: IdsIn, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        return {"ids": c.svc.approve(_owned_ids(c, req.ids))}

    @r.post("/review/reject", response_model=IdsOut, tags=["review"], responses=NOT_FOUND, deprecated=True,
            summary='Deprecated: POST /review/decide "delete". Delete pending memories; returns the ids rejected')
    def reject(req: RejectIn, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        return {"ids": c.svc.reject(_owned_ids(c, req.ids), reason=req.reason)}

    @r.get("/review/queue", response_model=ReviewQueueOut, tags=["review"], deprecated=True,
           summary="Deprecated: GET /review. Memories flagged by the lifecycle")
    def review_queue(user_id: str | None = _user_q(), c: Ctx = Depends(ctx)) -> dict[str, Any]:
        items = [i for i in c.svc.review_queue(user_id=c.access.user(user_id)) if c.access.allows(i.user_id)]
        return {"items": [review_dict(i) for i in items]}

    @r.post("/review/resolve", response_model=ChunksOut, tags=["review"], responses=NOT_FOUND, deprecated=True,
            summary='Deprecated: POST /review/decide. Decide on a flagged memory: "keep", "archive" or "delete"')
    def resolve(req: ResolveIn, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        _owned_ids(c, [req.chunk_id])
        kept = c.svc.resolve_review(req.chunk_id, req.decision.value)
        return chunks_json([] if kept is None else [kept])

    @r.post("/maintain", response_model=MaintenanceReport, tags=["lifecycle"],
            responses=NOT_FOUND, summary="Run maintenance now: merge duplicates, expire, evict (admin key)")
    def maintain(user_id: str | None = _user_q(), c: Ctx = Depends(ctx)) -> dict[str, Any]:
        c.access.must_admin("maintenance")
        return c.svc.maintain(user_id=c.access.one_user(user_id)).to_dict()

    @r.get("/fields", response_model=FieldsOut, tags=["search"],
           summary="The declared metadata fields, usable as keys of a search's filters")
    def fields(c: Ctx = Depends(ctx)) -> dict[str, Any]:
        return {"fields": c.svc.declared_fields()}

    @r.post("/fields", response_model=FieldsOut, tags=["search"],
            summary="Declare metadata fields as filters, with their types; returns all of them (admin key)")
    def declare(req: FieldsIn, c: Ctx = Depends(ctx)) -> dict[str, Any]:
        c.access.must_admin("declare fields")
        return {"fields": c.svc.declare_fields(req.fields)}

    @r.get("/stats", response_model=StatsOut, tags=["stats"],
           responses=NOT_FOUND, summary="Hottest and newest memories, distributions, growth, search latency, dead letters")
    def stats(user_id: str | None = _user_q(), top: int = Query(10, ge=1, le=100),
              c: Ctx = Depends(ctx)) -> dict[str, Any]:
        return c.svc.stats(user_id=c.access.one_user(user_id), top=top).to_dict()

    return r
