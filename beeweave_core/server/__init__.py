"""The BeeWeave REST service (FastAPI + uvicorn): ``create_app(ServerConfig(...))``.

Importing this package loads neither FastAPI nor a store; ``create_app`` and ``serve``
import the server's dependencies when called (``pip install "beeweave[server]"``).
"""

from __future__ import annotations

from typing import Any

from .config import ServerConfig, keys_from_env, load_api_keys, parse_api_keys
from .service import MemoryService
from .stores import TenantStores, open_memory

__all__ = ["create_app", "serve", "ServerConfig", "MemoryService", "TenantStores", "open_memory",
           "parse_api_keys", "load_api_keys", "keys_from_env"]


def create_app(config: ServerConfig, **kwargs: Any) -> Any:
    """The FastAPI app (see :mod:`beeweave_core.server.app`)."""
    try:
        from .app import create_app as make
    except ImportError as exc:
        from ..errors import MissingDependencyError

        raise MissingDependencyError(f"the server needs FastAPI and uvicorn: pip install \"beeweave[server]\" "
                                     f"({exc.name} is missing)") from exc
    return make(config, **kwargs)


def serve(config: ServerConfig, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info") -> None:
    """Run the API with uvicorn until interrupted."""
    app = create_app(config)
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level=log_level)
