"""Helpers of the service tests: a real BeeWeave server on 127.0.0.1 (uvicorn in a thread, a
free port) with two tenants.

Tenant "acme" has two keys (rotation), tenant "beta" one. Both tenants have a user
"alice", so isolation is tested with colliding user ids.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from beeweave_core.client import BeeWeaveClient
from beeweave_core.server import ServerConfig, create_app

EMBEDDER = "beeweave:hashing-64"
ACME_KEY, ACME_KEY2, BETA_KEY = "acme-key-0001", "acme-key-0002", "beta-key-0001"
KEYS = {ACME_KEY: "acme", ACME_KEY2: "acme", BETA_KEY: "beta"}


@dataclass
class LiveServer:
    url: str
    app: Any
    server: uvicorn.Server
    thread: threading.Thread
    root: Path | None

    def http(self, key: str | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"X-API-Key": key} if key else {}, timeout=30)

    def client(self, key: str) -> BeeWeaveClient:
        return BeeWeaveClient(self.url, key)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(config: ServerConfig) -> LiveServer:
    app = create_app(config)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    local = config.store is not None and not str(config.store).startswith(("postgresql://", "postgres://"))
    root = Path(config.store) if local else None
    return LiveServer(f"http://127.0.0.1:{port}", app, server, thread, root)


def event(user_id: str, query: str, response: str, **kw: Any) -> dict[str, Any]:
    return {"user_id": user_id, "query": query, "response": response, **kw}
