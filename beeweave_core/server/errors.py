"""How errors leave the server: always JSON ``{"error", "detail"}``, never a 500 for bad input.

=====================================  ======
``InvalidInputError`` (and subclasses)  400
``UnknownFilterError``                  400
missing API key                         401
API key not recognised                  403
``PermissionDeniedError`` (scope rules)  403
``NotFoundError``, unknown route        404
``DuplicateIdError``                    409
body larger than the limit              413
request body fails the schema           422 (``errors`` lists each field)
``QueueFullError``                      503 with ``Retry-After``
store unavailable / closed / no model   503
``EmbedderChangedError``                503 (``Retry-After`` when the store is opened again)
anything else (a bug)                   500, logged
=====================================  ======

``EmbedderChangedError``: another process re-embedded the store after the server opened it
(``beeweave reembed``), so this server's model is no longer the store's and it can neither
search nor store vectors until it opens the store again. Like a closed store or a model that
cannot load, the server cannot serve the store now and the request was not at fault, so 503
(not the 500 of a bug, nor of a store opened with the wrong model, which never got to serve).
A server that opens stores on their recorded model (no model configured) closes its copy
then, and the next request opens the store on its new model: ``Retry-After: 1``. One
configured with a model keeps answering 503 without ``Retry-After`` (a restart with the
store's model is what helps, as the detail says).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any
from urllib.parse import unquote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import (
    BeeWeaveError,
    DuplicateIdError,
    EmbedderChangedError,
    InvalidInputError,
    MissingDependencyError,
    ModelLoadError,
    NotFoundError,
    PermissionDeniedError,
    StoreClosedError,
    StoreUnavailableError,
)
from ..ingest.errors import QueueFullError

__all__ = ["SafeJSONResponse", "BodyLimit", "EncodedSlashes", "install_error_handlers", "status_of", "segment"]

logger = logging.getLogger(__name__)

_HTTP_NAMES = {408: "RequestTimeout", 400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
               405: "MethodNotAllowed", 413: "PayloadTooLarge", 415: "UnsupportedMediaType", 422: "ValidationError"}


class SafeJSONResponse(JSONResponse):
    """JSON with non-ASCII escaped: text holding a lone surrogate (valid in JSON as ``"\\ud800"``)
    is echoed safely instead of failing to encode as UTF-8."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def _error(status: int, kind: str, detail: str, **extra: Any) -> SafeJSONResponse:
    headers = extra.pop("headers", None)
    return SafeJSONResponse({"error": kind, "detail": detail, **extra}, status_code=status, headers=headers)


def status_of(exc: BeeWeaveError) -> int:
    if isinstance(exc, DuplicateIdError):
        return 409
    if isinstance(exc, InvalidInputError):
        return 400
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, PermissionDeniedError):  # a scope's write rules refuse the agent
        return 403
    if isinstance(exc, (QueueFullError, StoreUnavailableError, StoreClosedError, MissingDependencyError,
                        ModelLoadError, EmbedderChangedError)):
        return 503
    return 500  # a mismatched store (embedder, tokenizer, schema) is the operator's to fix


async def _reopen(request: Request) -> bool:
    """Drop the stale store that served ``request`` (``TenantStores.drop``): the next request
    opens it again, so a server follows ``beeweave reembed`` without a restart when it opens
    stores on their recorded model (no ``embedder`` configured; one configured by name keeps
    refusing, as a store opened with the wrong model does)."""
    served = getattr(request.state, "tenant_store", None)  # none before a store was got for it
    if served is None:
        return False
    return bool(await asyncio.to_thread(request.app.state.stores.drop, *served))


def _where(loc: Any) -> str:
    parts = [str(p) for p in loc if p not in ("body",)] if isinstance(loc, (list, tuple)) else [str(loc)]
    return ".".join(parts) or "body"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(BeeWeaveError)
    async def beeweave_error(request: Request, exc: BeeWeaveError) -> SafeJSONResponse:
        status = status_of(exc)
        if status >= 500:
            logger.error("BeeWeave %s on %s %s: %s", type(exc).__name__, request.method, request.url.path, exc)
        headers = {"Retry-After": "1"} if isinstance(exc, (QueueFullError, StoreUnavailableError)) else None
        detail = str(exc) or type(exc).__name__
        if isinstance(exc, EmbedderChangedError) and await _reopen(request):
            headers = {"Retry-After": "1"}
            detail += "; this server closed its copy of the store: the next request opens it on the model it records"
        return _error(status, type(exc).__name__, detail, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> SafeJSONResponse:
        errors = []
        for e in exc.errors():
            msg = str(e.get("msg", "invalid"))
            ctx = e.get("ctx") or {}
            if e.get("type") == "json_invalid" and ctx.get("error"):
                msg = f"malformed JSON: {ctx['error']}"
            elif e.get("type") == "missing" and tuple(e.get("loc", ())) == ("body",):
                msg = "the request needs a JSON object as its body"
            errors.append({"loc": [str(p) for p in e.get("loc", ())], "msg": msg, "type": str(e.get("type", ""))})
        detail = "; ".join(f"{_where(e['loc'])}: {e['msg']}" for e in errors[:5]) or "invalid request"
        if len(errors) > 5:
            detail += f"; and {len(errors) - 5} more"
        return _error(422, "ValidationError", detail, errors=errors)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> SafeJSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail)
        if exc.status_code == 400 and detail == "There was an error parsing the body":
            detail = "the request body is not valid UTF-8 JSON"
        return _error(exc.status_code, _HTTP_NAMES.get(exc.status_code, "HTTPError"), detail,
                      headers=getattr(exc, "headers", None))

    @app.exception_handler(OverflowError)
    async def overflow(request: Request, exc: OverflowError) -> SafeJSONResponse:
        # A date near the calendar's limits whose UTC time falls past them (9999-12-31T23:59-12:00).
        return _error(400, "InvalidInputError", f"a date or number is out of range: {exc}")

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> SafeJSONResponse:
        logger.exception("unexpected error on %s %s", request.method, request.url.path)
        return _error(500, "InternalError", f"unexpected {type(exc).__name__}; the server log has the details")


class BodyLimit:
    """ASGI middleware: request bodies above ``max_bytes`` get 413, checked on the declared
    Content-Length first and on the bytes actually received (chunked uploads) too."""

    def __init__(self, app: ASGIApp, max_bytes: int, read_timeout: float | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.read_timeout = read_timeout  # each chunk of the body must arrive within this many seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = None
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await _error(400, "BadRequest", "the Content-Length header is not a number")(scope, receive, send)
                    return
        if declared is not None and declared > self.max_bytes:
            await self._too_large(scope, receive, send)
            return
        seen = 0
        body_done = False

        async def limited() -> Message:
            nonlocal seen, body_done
            # Once the body is in, a receive waits for the client to go away (a streamed
            # response such as the event stream listens for that): no read timeout then.
            if self.read_timeout is None or body_done:
                message = await receive()
            else:
                try:
                    message = await asyncio.wait_for(receive(), self.read_timeout)
                except asyncio.TimeoutError:
                    raise HTTPException(408, f"the request body did not arrive within {self.read_timeout} s") from None
            if message["type"] == "http.request":
                body_done = not message.get("more_body", False)
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    # An HTTPException raised while the body is read reaches the handler above.
                    raise HTTPException(413, self._message())
            return message

        await self.app(scope, limited, send)

    def _message(self) -> str:
        return f"the request body is larger than the limit of {self.max_bytes} bytes"

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        await _error(413, "PayloadTooLarge", self._message())(scope, receive, send)


class EncodedSlashes:
    """ASGI middleware: a ``%2F`` inside a path segment stays inside that segment.

    The ASGI server decodes the whole path, so ``/users/a%2Fb/export`` would route as four
    segments. Here each raw segment is decoded on its own and a ``/`` or ``%`` it holds is
    re-escaped, so routes with one-segment parameters match exactly what the client meant
    (``DELETE /users/0/export`` is no route, not a user named "0/export"); route handlers
    unescape their parameters with :func:`segment`.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw = scope.get("raw_path")
            if raw:
                try:
                    parts = raw.decode("ascii").split("/")
                except UnicodeDecodeError:
                    parts = None
                if parts is not None:
                    # In place: outer middleware (the request log) reads the route the router sets here.
                    scope["path"] = "/".join(unquote(p).replace("%", "%25").replace("/", "%2F") for p in parts)
        await self.app(scope, receive, send)


def segment(value: str) -> str:
    """A path parameter as the client sent it (see :class:`EncodedSlashes`)."""
    return unquote(value)
