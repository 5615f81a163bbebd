"""A BeeWeave server in a child process on 127.0.0.1 for the benchmarks that need one
(sse_fanout.py, tool_calls.py, webhook_burst.py): the server's work does not share the
benchmark's interpreter (its clients, its receiver), as with ``beeweave serve``.

``ServerConfig`` arguments go through as a dict; ``embedder`` must be a name
(``"beeweave:hashing-64"``) or an object the child can import (``"module:attribute"``).
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

ADMIN = "bench-admin-key"
TENANT = "bench"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(port: int, config: dict[str, Any]) -> None:
    import uvicorn

    from beeweave_core.server import ServerConfig, create_app

    config = dict(config)
    emb = config.get("embedder")
    if isinstance(emb, str) and ":" in emb and not emb.startswith("beeweave:"):
        module, attr = emb.split(":")
        config["embedder"] = getattr(importlib.import_module(module), attr)()
    app = create_app(ServerConfig(**config))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


@contextmanager
def serve(config: dict[str, Any]) -> Iterator[str]:
    """Start the server with ``ServerConfig(**config)`` (``api_keys`` defaults to ADMIN for
    TENANT) and yield its URL; stop it on leaving."""
    config = {"api_keys": {ADMIN: TENANT}, **config}
    port = _free_port()
    proc = mp.get_context("spawn").Process(target=_run, args=(port, config), daemon=True)
    proc.start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if not proc.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the benchmark server did not start")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.join(15)


def client(url: str, timeout: float = 600) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"X-API-Key": ADMIN}, timeout=timeout)


def load_average() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"
