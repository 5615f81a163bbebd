"""The MCP server over streamable HTTP on a loopback address, behind API keys.

Keys are configured as for ``beeweave serve`` (``--api-keys FILE``, ``BEEWEAVE_API_KEYS_FILE``
or ``BEEWEAVE_API_KEYS``; see :mod:`beeweave_core.server.config`) and sent as
``X-API-Key: <key>`` or ``Authorization: Bearer <key>``. A missing key is 401, an unknown
one 403, before the request reaches MCP. Keys are compared by SHA-256 digest, as the
REST server does. A key scoped to users (``{"tenant": ..., "users": [...], "admin": false}``)
reaches only their memories and forgets users only with ``admin``, as in the REST API: the
gate hands the key's :class:`~beeweave_core.server.config.KeyScope` (the REST API's too) to the tools. The server binds loopback addresses only: it holds a user's memories.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidInputError
from ..server.config import KeyScope, key_digest, tenant_of_scope

__all__ = ["ApiKeyGate", "http_app", "serve_http", "served_tenant", "check_loopback"]


def served_tenant(keys: Mapping[str, Any], tenant: str | None) -> str:
    """The tenant whose store this server serves: ``tenant`` (``--tenant``) when given; else the
    one tenant the keys name (a store is one tenant's, as a single file is for ``beeweave
    serve``). Keys naming several tenants without ``--tenant`` are refused at start."""
    if tenant is not None:
        return tenant
    named = sorted({tenant_of_scope(v) for v in keys.values()})
    if len(named) > 1:
        raise InvalidInputError(f"the API keys name {len(named)} tenants ({', '.join(named)}) but this MCP server "
                                "serves one store: pass --tenant to say whose it is")
    return named[0]


def check_loopback(host: str) -> str:
    if host == "localhost":
        return host
    try:
        if ipaddress.ip_address(host).is_loopback:
            return host
    except ValueError:
        pass
    raise InvalidInputError(f"the MCP server binds loopback addresses only (127.0.0.1, ::1, localhost), not {host!r}; "
                            "put a TLS reverse proxy in front of it to reach it from elsewhere")


class ApiKeyGate:
    """ASGI middleware: HTTP requests need a configured API key; lifespan events pass through."""

    def __init__(self, app: Any, keys: Mapping[str, Any], tenant: str | None = None) -> None:
        if not keys:
            raise InvalidInputError("no API keys: pass --api-keys FILE or set BEEWEAVE_API_KEYS='key:name,...'")
        self.app = app
        self.tenant = served_tenant(keys, tenant)
        # Only the served tenant's keys are known: another tenant's key is refused as unknown,
        # as the REST API never opens one tenant's store for another's key.
        self._known = {key_digest(k): KeyScope.of(v) for k, v in keys.items() if tenant_of_scope(v) == self.tenant}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        key = headers.get("x-api-key")
        auth = headers.get("authorization", "")
        if not key and auth[:7].lower() == "bearer ":
            key = auth[7:].strip()
        if not key:
            await self._refuse(send, 401, "missing API key: send 'X-API-Key: <key>' or 'Authorization: Bearer <key>'")
        elif key_digest(key) not in self._known:
            await self._refuse(send, 403, "API key not recognised")
        else:
            from .server import SCOPE_KEY

            await self.app({**scope, SCOPE_KEY: self._known[key_digest(key)]}, receive, send)

    @staticmethod
    async def _refuse(send: Any, status: int, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if status == 401:
            headers.append((b"www-authenticate", b"Bearer"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def http_app(memory: Any, keys: Mapping[str, Any], *, host: str = "127.0.0.1", path: str = "/mcp",
             default_user_id: str | None = None, tenant: str | None = None) -> Any:
    """The ASGI app: the SDK's streamable HTTP app behind the key check (``tenant``: whose
    store ``memory`` is; see :func:`served_tenant`)."""
    from .server import build_server

    app = build_server(memory, default_user_id=default_user_id).streamable_http_app(streamable_http_path=path, host=check_loopback(host))
    return ApiKeyGate(app, keys, tenant)


def serve_http(memory: Any, keys: Mapping[str, Any], *, host: str = "127.0.0.1", port: int = 8765,
               path: str = "/mcp", log_level: str = "warning", default_user_id: str | None = None,
               tenant: str | None = None) -> None:
    import uvicorn

    uvicorn.run(http_app(memory, keys, host=host, path=path, default_user_id=default_user_id, tenant=tenant),
                host=host, port=port, log_level=log_level)
