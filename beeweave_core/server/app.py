"""The REST API: ``create_app(config)`` returns a FastAPI app; ``beeweave serve`` runs it with uvicorn.

Every route under ``/api/v1`` needs an API key and works on the key's tenant store only
(see :mod:`.stores`); ``GET /healthz`` needs none. The routes are thin: each validates
its body (pydantic), calls :class:`MemoryService` and turns the result into JSON.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

from fastapi import APIRouter, Depends, FastAPI, Query, Request

from .. import __version__
from ..errors import InvalidInputError, NotFoundError
from ..ingest import IngestConfig
from ..lifecycle.reports import MaintenanceReport
from ..network import ExpandOptions
from .auth import KeyRing, tenant_of
from .config import ServerConfig
from .errors import BodyLimit, SafeJSONResponse, install_error_handlers
from .schemas import (
    ChunksOut,
    ErrorOut,
    EventIn,
    ExportOut,
    FeedbackIn,
    FlushOut,
    ForgetOut,
    HealthOut,
    IdsIn,
    IdsOut,
    IngestAccepted,
    RejectIn,
    ResolveIn,
    ReviewQueueOut,
    SearchIn,
    SearchOut,
    StatsOut,
    TraceOut,
)
from .service import MemoryService, review_dict
from .stores import TenantStores, is_postgres_url, open_memory

__all__ = ["create_app"]

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": text} for code, text in (
        (400, "The engine refused a value (the detail says which and why)."),
        (401, "No API key."),
        (403, "The API key is not recognised."),
        (413, "The request body is larger than the server's limit."),
        (422, "The body does not match the schema (each field is listed)."),
        (503, "The store is busy or unavailable (e.g. the ingest queue is full); retry later."))}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorOut, "description": "No such memory or user."}}


def _service(request: Request, tenant: str = Depends(tenant_of)) -> MemoryService:
    return request.app.state.stores.get(tenant)


def _chunks(chunks: Any) -> dict[str, Any]:
    return {"chunks": [c.to_dict() for c in chunks]}


def _router(config: ServerConfig) -> APIRouter:
    r = APIRouter(prefix="/api/v1", responses=_ERRORS)

    @r.post("/ingest", status_code=202, response_model=IngestAccepted, tags=["ingest"],
            summary="Queue a knowledge event (durable; processed in the background)")
    def ingest(event: EventIn, svc: MemoryService = Depends(_service)) -> dict[str, Any]:
        return {"id": svc.ingest(event.model_dump()), "status": "queued"}

    @r.post("/flush", response_model=FlushOut, tags=["ingest"],
            summary="Wait until the tenant's queued events are processed")
    def flush(timeout: float = Query(10.0, ge=0, le=config.max_flush_timeout),
              svc: MemoryService = Depends(_service)) -> dict[str, Any]:
        drained = svc.flush(timeout)
        return {"drained": drained, "pending": svc.memory.pending_events()}

    @r.post("/search", response_model=SearchOut, tags=["search"],
            summary="Hybrid search with filters, graph expansion and MMR")
    def search(req: SearchIn, svc: MemoryService = Depends(_service)) -> dict[str, Any]:
        if req.k > config.max_k:
            raise InvalidInputError(f"k may be at most {config.max_k} on this server, got {req.k}")
        expand: Any = req.expand
        if req.expand is not None and not isinstance(req.expand, bool):
            e = req.expand
            expand = ExpandOptions(hops=e.hops, decay=e.decay, limit=e.limit,
                                   edge_types=None if e.edge_types is None else tuple(t.value for t in e.edge_types))
        t0 = time.perf_counter()
        hits = svc.search(req.query, user_id=req.user_id, k=req.k,
                          filters=req.filters.to_engine() if req.filters is not None else None,
                          fusion=req.fusion, min_score=req.min_score, expand=expand, mmr=req.mmr,
                          loosen=req.loosen, query_embedding=req.query_embedding)
        return {"hits": [h.to_dict() for h in hits], "took_ms": round((time.perf_counter() - t0) * 1000, 3)}

    @r.post("/feedback", response_model=ChunksOut, tags=["feedback"], responses=_NOT_FOUND,
            summary='Tell the memory how its memories did: "used", "up" or "down"')
    def feedback(req: FeedbackIn, svc: MemoryService = Depends(_service)) -> dict[str, Any]:
        return _chunks(svc.feedback(req.chunk_ids, req.signal.value))

    @r.get("/sessions/{session_id:path}/trace", response_model=TraceOut, tags=["sessions"],
           summary="Every memory of a session (any status), oldest first")
    def trace(session_id: str, user_id: Optional[str] = Query(None, min_length=1, max_length=512),
              svc: MemoryService = Depends(_service)) -> dict[str, Any]:
        return {"session_id": session_id, **_chunks(svc.trace(session_id, user_id=user_id))}

    @r.get("/users/{user_id:path}/export", response_model=ExportOut, tags=["users"], responses=_NOT_FOUND,
           summary="All of a user's data as JSON")
    def export(user_id: str, svc: MemoryService = Depends(_service)) -> dict[str, Any]:
        data = svc.export_user(user_id)
        if not any(data[k] for k in ("chunks", "versions", "audit", "facts", "conflicts", "review", "searches")):
            raise NotFoundError(f"no data of user {user_id!r}")
        return data

    @r.delete("/users/{user_id:path}", response_model=ForgetOut, tags=["users"],
              summary="Forget everything of a user (records, index entries, relationships, history)")
    def forget(user_id: str, svc: MemoryService = Depends(_service)) -> dict[str, Any]:
        return {"user_id": user_id, "deleted": svc.forget_user(user_id)}

    @r.get("/review/pending", response_model=ChunksOut, tags=["review"],
           summary="Memories waiting for review, oldest first")
    def pending(user_id: Optional[str] = Query(None, min_length=1, max_length=512),
                agent_id: Optional[str] = Query(None, min_length=1, max_length=512),
                limit: int = Query(100, ge=0, le=1000), svc: MemoryService = Depends(_service)) -> dict[str, Any]:
        return _chunks(svc.pending(user_id=user_id, agent_id=agent_id, limit=limit))

    @r.post("/review/approve", response_model=IdsOut, tags=["review"], responses=_NOT_FOUND,
            summary="Make pending memories active; returns the ids that changed")
    def approve(req: IdsIn, svc: MemoryService = Depends(_service)) -> dict[str, Any]:
        return {"ids": svc.approve(req.ids)}

    @r.post("/review/reject", response_model=IdsOut, tags=["review"], responses=_NOT_FOUND,
            summary="Delete pending memories; returns the ids rejected")
    def reject(req: RejectIn, svc: MemoryService = Depends(_service)) -> dict[str, Any]:
        return {"ids": svc.reject(req.ids, reason=req.reason)}

    @r.get("/review/queue", response_model=ReviewQueueOut, tags=["review"],
           summary="Memories flagged by the lifecycle (stale, expired but valued)")
    def review_queue(user_id: Optional[str] = Query(None, min_length=1, max_length=512),
                     svc: MemoryService = Depends(_service)) -> dict[str, Any]:
        return {"items": [review_dict(i) for i in svc.review_queue(user_id=user_id)]}

    @r.post("/review/resolve", response_model=ChunksOut, tags=["review"], responses=_NOT_FOUND,
            summary='Decide on a flagged memory: "keep", "archive" or "delete"')
    def resolve(req: ResolveIn, svc: MemoryService = Depends(_service)) -> dict[str, Any]:
        kept = svc.resolve_review(req.chunk_id, req.decision.value)
        return _chunks([] if kept is None else [kept])

    @r.post("/maintain", response_model=MaintenanceReport, tags=["lifecycle"],
            summary="Run maintenance now: merge duplicates, expire, evict")
    def maintain(user_id: Optional[str] = Query(None, min_length=1, max_length=512),
                 svc: MemoryService = Depends(_service)) -> dict[str, Any]:
        return svc.maintain(user_id=user_id).to_dict()

    @r.get("/stats", response_model=StatsOut, tags=["stats"],
           summary="Hottest and newest memories, distributions, growth, search latency")
    def stats(user_id: Optional[str] = Query(None, min_length=1, max_length=512),
              top: int = Query(10, ge=1, le=100), svc: MemoryService = Depends(_service)) -> dict[str, Any]:
        return svc.stats(user_id=user_id, top=top).to_dict()

    return r


def create_app(config: ServerConfig, *, stores: TenantStores | None = None) -> FastAPI:
    """The FastAPI app for ``config``; ``stores`` replaces how tenant stores are opened (tests)."""
    if stores is None:
        def opener(store: Any, tenant: str | None = None) -> MemoryService:
            kwargs = dict(config.memory_kwargs)
            if config.queue_dir is not None and tenant is not None and is_postgres_url(store):
                ingest = kwargs.get("ingest") or IngestConfig()
                Path(config.queue_dir).mkdir(parents=True, exist_ok=True)
                kwargs["ingest"] = replace(ingest, queue_path=Path(config.queue_dir) / f"{tenant}.queue")
            return MemoryService(open_memory(store, tenant=tenant, embedder=config.embedder, **kwargs))

        stores = TenantStores(config.store, config.tenants, opener=opener)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            stores.close()

    app = FastAPI(title="BeeWeave", version=__version__, lifespan=lifespan, default_response_class=SafeJSONResponse,
                  description="Agent memory as a service: ingest knowledge events, search them (hybrid BM25 + "
                              "vectors over a knowledge network), give feedback, review, export and forget. "
                              "Each API key reads and writes only its tenant's store.")
    app.state.config = config
    app.state.stores = stores
    app.state.keyring = KeyRing(config.api_keys)
    install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)

    @app.get("/healthz", response_model=HealthOut, tags=["health"], summary="Liveness (no API key needed)")
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "version": __version__}

    app.include_router(_router(config))
    return app
