"""What every route depends on: the caller's access, a slot in its tenant's limit, its store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import Depends, Request

from ..records import KnowledgeChunk
from .auth import Access, access_of
from .service import MemoryService

__all__ = ["Ctx", "ctx", "slot", "ERRORS", "NOT_FOUND", "CONFLICT", "chunks_json"]

ERRORS: dict[int | str, dict[str, Any]] = {}
NOT_FOUND: dict[int | str, dict[str, Any]] = {}
CONFLICT: dict[int | str, dict[str, Any]] = {}


def _init_errors() -> None:
    from .schemas import ErrorOut

    ERRORS.update({code: {"model": ErrorOut, "description": text} for code, text in (
        (400, "The engine refused a value (the detail says which and why)."),
        (401, "No API key."),
        (403, "The API key is not recognised, or may not do this (admin routes)."),
        (413, "The request body is larger than the server's limit."),
        (422, "The body does not match the schema (each field is listed)."),
        (503, "The store is busy or unavailable (the ingest queue is full, the tenant has too many requests "
              "in flight); retry later. Or (EmbedderChangedError) the store was re-embedded with another model "
              "since the server opened it: a server with no model configured opens it again for the next "
              "request (Retry-After), one configured with a model needs a restart with the store's model."))})
    NOT_FOUND.update({404: {"model": ErrorOut, "description": "No such memory or user (for this API key)."}})
    CONFLICT.update({409: {"model": ErrorOut, "description": "A memory with this id already exists."}})


_init_errors()


async def slot(request: Request, access: Access = Depends(access_of)) -> AsyncIterator[Access]:
    """Wait (in the event loop, no thread held) for a slot of the tenant's concurrency limit."""
    limiter = request.app.state.limiter
    async for _ in limiter.slot(access.tenant):
        yield access


@dataclass
class Ctx:
    access: Access
    svc: MemoryService
    request: Request

    def memories(self, ids: Sequence[str], *, reads: bool = False) -> dict[str, KnowledgeChunk]:
        """The memories ``ids`` (id -> memory), after checking this key may edit each one
        (``reads``: read it, as the shared knowledge its searches return). A missing id and one
        the key may not touch get one answer, ``hidden``: a scoped key must not learn which ids
        exist. Every route that acts on memories by id checks here."""
        found = {ch.id: ch for ch in self.svc.memory.get_many(ids)}
        (self.access.check_readable if reads else self.access.own_ids)(ids, found)
        return found


def ctx(request: Request, access: Access = Depends(slot)) -> Ctx:
    return _ctx(request, access)


def unlimited_ctx(request: Request, access: Access = Depends(access_of)) -> Ctx:
    """For routes that wait asynchronously (flush, events): they must not take a slot while waiting."""
    return _ctx(request, access)


def _ctx(request: Request, access: Access) -> Ctx:
    svc = request.app.state.stores.get(access.tenant)
    # which store served the request: an error that says the store went stale drops it (errors.py)
    request.state.tenant_store = (access.tenant, svc)
    return Ctx(access, svc, request)


def chunks_json(chunks: Any) -> dict[str, Any]:
    return {"chunks": [c.to_dict() for c in chunks]}
