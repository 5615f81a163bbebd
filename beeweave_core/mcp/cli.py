"""``beeweave mcp``: the arguments and the command (registered by :mod:`beeweave_core.cli`).

``beeweave [--store S] [--embedder E] mcp [--transport stdio|http] [--host H] [--port P] [--api-keys FILE]
[--user-id USER]``
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import InvalidInputError, MissingDependencyError

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags and their ``BEEWEAVE_*`` variables are declared in :mod:`beeweave_core.options`."""
    from ..options import add_arguments as add_options

    add_options(p, "mcp")


def run(args: Any) -> int:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError('the MCP server needs the mcp SDK: pip install "beeweave-memory[mcp]"') from exc
    if args.store.startswith(("http://", "https://")):
        raise InvalidInputError("beeweave mcp serves a local store (a SQLite file, a directory with --tenant, "
                                "or a PostgreSQL URL), not a server URL")
    from ..server.config import keys_from_env, load_api_keys
    from ..server.stores import open_memory
    from .http import check_loopback, served_tenant

    keys = None
    if args.transport == "http":
        check_loopback(args.host)
        keys = load_api_keys(args.api_keys) if args.api_keys else keys_from_env()
        if not keys:
            raise InvalidInputError("HTTP needs API keys: pass --api-keys FILE or set BEEWEAVE_API_KEYS='key:name,...'")
    # Whose store this is: keys of several tenants need --tenant, refused before the store opens.
    tenant = served_tenant(keys, args.tenant) if keys else None
    memory = open_memory(args.store, tenant=args.tenant, embedder=args.embedder)
    try:
        memory.warm_up()  # the model loads now, not inside the agent's first search
        if args.transport == "stdio":
            from .server import build_server

            build_server(memory, default_user_id=args.user_id).run("stdio")
        else:
            from .http import serve_http

            print(f"beeweave: MCP over streamable HTTP on http://{args.host}:{args.port}{args.path} "
                  f"({args.store})", file=sys.stderr)
            serve_http(memory, keys or {}, host=args.host, port=args.port, path=args.path,
                       default_user_id=args.user_id, tenant=tenant)
    finally:
        memory.close()
    return 0
