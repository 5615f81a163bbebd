"""The BeeWeave REST service (FastAPI + uvicorn): ``create_app(ServerConfig(...))``.

Importing this package loads neither FastAPI nor a store; ``create_app`` and ``serve``
import the server's dependencies when called (``pip install "beeweave-memory[server]"``).
"""

from __future__ import annotations

from typing import Any

from .config import ServerConfig, keys_from_env, load_api_keys, parse_api_keys
from .service import MemoryService
from .stores import TenantStores, open_memory

__all__ = ["create_app", "serve", "uvicorn_config", "ServerConfig", "MemoryService", "TenantStores", "open_memory",
           "parse_api_keys", "load_api_keys", "keys_from_env"]


def create_app(config: ServerConfig, **kwargs: Any) -> Any:
    """The FastAPI app (see :mod:`beeweave_core.server.app`)."""
    try:
        from .app import create_app as make
    except ImportError as exc:
        from ..errors import MissingDependencyError

        raise MissingDependencyError(f"the server needs FastAPI and uvicorn: pip install \"beeweave-memory[server]\" "
                                     f"({exc.name} is missing)") from exc
    return make(config, **kwargs)


def uvicorn_config(config: ServerConfig, app: Any, *, host: str = "127.0.0.1", port: int = 8000,
                   log_level: str = "info", **kwargs: Any) -> Any:
    """The ``uvicorn.Config`` with the server's limits: request-read and keep-alive timeouts and
    the connection limit (see :mod:`.limits`)."""
    import uvicorn

    from .limits import limited_protocol

    return uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on",
                          http=limited_protocol(config.read_timeout, config.max_connections),
                          timeout_keep_alive=int(max(1, round(config.keep_alive_timeout))),
                          limit_concurrency=2 * config.max_connections + 64,  # aborted ones linger a moment
                          **kwargs)


def serve(config: ServerConfig, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info",
          json_logs: bool = False) -> None:
    """Run the API with uvicorn until interrupted (``json_logs``: every log line one JSON object)."""
    import logging

    import uvicorn

    app = create_app(config)
    log_config: Any = uvicorn.config.LOGGING_CONFIG
    if json_logs:
        log_config = {"version": 1, "disable_existing_loggers": False,
                      "formatters": {"json": {"()": "beeweave_core.server.observe.JSONFormatter"}},
                      "handlers": {"default": {"class": "logging.StreamHandler", "formatter": "json",
                                               "stream": "ext://sys.stderr"}},
                      "root": {"handlers": ["default"], "level": log_level.upper()},
                      "loggers": {"uvicorn": {"level": log_level.upper()},
                                  "uvicorn.access": {"level": "WARNING"}}}
    server = uvicorn.Server(uvicorn_config(config, app, host=host, port=port, log_level=log_level,
                                           log_config=log_config))
    if not json_logs:
        logging.getLogger("beeweave.server.requests").setLevel(log_level.upper())
    server.run()
