"""BeeWeave as an MCP server (``beeweave mcp``), built on the official ``mcp`` SDK.

``build_server(memory)`` gives the ``MCPServer`` (tools and resources, see
:mod:`beeweave_core.mcp.server`); ``http_app`` / ``serve_http`` put it on streamable HTTP
behind API keys. Importing this package imports neither the SDK nor a store.
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_server", "http_app", "serve_http"]


def build_server(memory: Any, **kwargs: Any) -> Any:
    from .server import build_server as build

    return build(memory, **kwargs)


def http_app(memory: Any, keys: Any, **kwargs: Any) -> Any:
    from .http import http_app as app

    return app(memory, keys, **kwargs)


def serve_http(memory: Any, keys: Any, **kwargs: Any) -> None:
    from .http import serve_http as serve

    serve(memory, keys, **kwargs)
