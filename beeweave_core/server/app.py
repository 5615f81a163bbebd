"""The REST API: ``create_app(config)`` returns a FastAPI app; ``beeweave serve`` runs it with uvicorn.

Every route under ``/api/v1`` needs an API key and works on the key's tenant store only
(see :mod:`.stores`), and within it on the key's users only (see :mod:`.auth`);
``GET /healthz`` and ``GET /metrics`` need none, nor do the web console's pages under
``/ui`` (they hold no data: their scripts call ``/api/v1`` with the key the user signs in
with). The routes are thin: each validates its body (pydantic), calls
:class:`MemoryService` and turns the result into JSON. At start the server opens every
tenant's store (its model loaded, its queued events resumed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from .. import __version__
from ..console.pages import mount_console
from ..errors import BeeWeaveError
from .auth import KeyRing
from .config import ServerConfig
from .errors import BodyLimit, EncodedSlashes, SafeJSONResponse, install_error_handlers
from .event_log import EventLog, WebhookSender
from .limits import TenantLimiter
from .observe import Metrics, RequestLog
from .routes_core import core_router
from .routes_events import events_router
from .routes_memories import memories_router
from .routes_sessions import sessions_router
from .schemas import HealthOut
from .service import MemoryService
from .stores import TenantStores, is_postgres_url, is_tenant_dir, open_memory, tenant_path

__all__ = ["create_app"]

logger = logging.getLogger(__name__)


def _events_path(config: ServerConfig, tenant: str | None, single: bool) -> Path | None:
    """Where a tenant's event log lives: beside its SQLite store, or in ``queue_dir`` for PostgreSQL."""
    store = config.store
    if store is None:
        return None
    if is_postgres_url(store):
        if config.queue_dir is None:
            return None
        Path(config.queue_dir).mkdir(parents=True, exist_ok=True)
        return Path(config.queue_dir) / f"{tenant}.events"
    if single or tenant is None:
        return Path(str(store)).with_name(Path(str(store)).name + ".events")
    return tenant_path(store, tenant).with_name(f"{tenant}.db.events")


def create_app(config: ServerConfig, *, stores: TenantStores | None = None) -> FastAPI:
    """The FastAPI app for ``config``; ``stores`` replaces how tenant stores are opened (tests)."""
    webhooks = WebhookSender(list(config.webhooks), max_queue=config.webhook_queue) if config.webhooks else None
    single = config.store is not None and not is_postgres_url(config.store) and not is_tenant_dir(config.store)

    def attach_events(tenant: str, svc: MemoryService) -> MemoryService:
        if getattr(svc, "event_log", None) is not None:
            return svc
        log = EventLog(_events_path(config, tenant, single), max_events=config.max_events)
        svc.event_log = log

        def on_event(ev: Any) -> None:
            seq = log.append(ev)
            if webhooks is not None:
                webhooks.submit(tenant, {"seq": seq, **ev.to_dict()})

        svc.memory.events.subscribe(on_event)
        if config.maintain_interval is not None:
            svc.memory.maintain(interval=config.maintain_interval)  # stops when the store closes
        return svc

    if stores is None:
        def opener(store: Any, tenant: str | None = None) -> MemoryService:
            # (a PostgreSQL tenant's ingest queue is a table of its database: no file here)
            return MemoryService(open_memory(store, tenant=tenant, embedder=config.embedder, **config.memory_kwargs))

        stores = TenantStores(config.store, config.tenants, opener=opener, follows_model=config.embedder is None)
    tenant_stores = stores
    tenant_stores.on_open = attach_events

    def warm(tenant: str) -> None:
        """Open the tenant now: load its model, resume its queued events."""
        svc = tenant_stores.get(tenant)
        start = getattr(svc.memory, "start_ingest", None)
        if start is not None:
            start()
        svc.memory.warm_up()  # the model (and jieba) load here, not on the first search

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if config.eager:
            for tenant in sorted(config.tenants):
                try:
                    await run_in_threadpool(warm, tenant)
                except BeeWeaveError as exc:  # the others still serve; this one is retried on its first request
                    logger.error("BeeWeave server: tenant %r could not be opened at start: %s", tenant, exc)
        try:
            yield
        finally:
            if webhooks is not None:
                await asyncio.sleep(0)  # let queued deliveries start; close() waits for the thread
                webhooks.close()
            tenant_stores.close()

    app = FastAPI(title="BeeWeave", version=__version__, lifespan=lifespan, default_response_class=SafeJSONResponse,
                  description="Agent memory as a service: ingest knowledge events, add and edit memories, search "
                              "them (hybrid BM25 + vectors over a knowledge network), give feedback, review, follow "
                              "memory events, export and forget. Each API key reads and writes only its tenant's "
                              "store, and within it only its users' memories when it is scoped to users.")
    metrics = Metrics(tenant_stores.opened, webhooks=webhooks)
    app.state.config = config
    app.state.stores = tenant_stores
    app.state.keyring = KeyRing(config.api_keys)
    app.state.limiter = TenantLimiter(config.tenant_concurrency, config.tenant_queue)
    app.state.metrics = metrics
    app.state.webhooks = webhooks
    install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes, read_timeout=config.read_timeout)
    app.add_middleware(EncodedSlashes)
    app.add_middleware(RequestLog, metrics=metrics)

    @app.get("/healthz", response_model=HealthOut, tags=["health"], summary="Liveness (no API key needed)")
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "version": __version__}

    @app.get("/metrics", tags=["health"], summary="Prometheus metrics (text exposition format)",
             response_class=Response, responses={200: {"content": {"text/plain": {}}}})
    def prometheus() -> Response:
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    app.include_router(core_router(config))
    app.include_router(memories_router())
    app.include_router(sessions_router())
    app.include_router(events_router(config))
    mount_console(app)  # /ui: pages that call the routes above with the user's own API key
    plain_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        # FastAPI describes SSE with OpenAPI 3.2's "itemSchema", which a 3.1 document may not hold.
        if app.openapi_schema is None:
            spec = plain_openapi()
            for ops in spec.get("paths", {}).values():
                for op in ops.values():
                    for resp in op.get("responses", {}).values():
                        media = resp.get("content", {}).get("text/event-stream")
                        if isinstance(media, dict) and "itemSchema" in media:
                            # Each event: {id, event, data}; data is a memory event as JSON text.
                            media["schema"] = {**media.pop("itemSchema"), "description": "one Server-Sent Event; "
                                               "data is a memory event as JSON, id resumes the stream"}
        return app.openapi_schema or plain_openapi()

    app.openapi = openapi  # type: ignore[method-assign]
    return app
