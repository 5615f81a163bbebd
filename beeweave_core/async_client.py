"""``AsyncBeeWeaveClient``: the BeeWeave server from async agents (``httpx.AsyncClient``).

Same meanings as :class:`beeweave_core.client.BeeWeaveClient`: ``await ingest(event)``
checks the event and hands it to a background task that posts it, retrying with backoff
while the server is unreachable, so the agent's coroutine never waits on the network;
``await search(...)`` times out after ``search_timeout`` (1.5 s) with
``StoreUnavailableError``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from . import errors as _errors
from .client import (
    _FLUSH_CALL,
    _FLUSH_MARGIN,
    _FLUSH_PAUSE,
    DEFAULT_TIMEOUTS,
    ServerError,
    _chunk,
    _hit,
    _plain,
    _plain_value,
    decode_response,
)
from .defaults import DEFAULT_TOP_K
from .errors import BeeWeaveError, InvalidInputError, StoreUnavailableError
from .ingest import errors as _ingest_errors
from .records import KnowledgeChunk, SearchHit, utcnow

__all__ = ["AsyncBeeWeaveClient"]

logger = logging.getLogger(__name__)


class AsyncBeeWeaveClient:
    """An async client of one tenant's memory (see the module docstring for the arguments'
    meanings; they are those of ``BeeWeaveClient``)."""

    def __init__(self, url: str, api_key: str | None = None, *, timeout: float = DEFAULT_TIMEOUTS["other"],
                 ingest_timeout: float = DEFAULT_TIMEOUTS["ingest"], search_timeout: float = DEFAULT_TIMEOUTS["search"],
                 buffer_size: int = 10_000, max_delay: float = 30.0, transport: Any = None) -> None:
        try:
            import httpx
        except ImportError as exc:
            raise _errors.MissingDependencyError('AsyncBeeWeaveClient needs httpx: pip install "beeweave-memory[client]"') \
                from exc
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidInputError(f"url must start with http:// or https://, got {url!r}")
        self.url = url.rstrip("/")
        self.ingest_timeout = float(ingest_timeout)
        self.search_timeout = float(search_timeout)
        self.buffer_size = buffer_size
        self.max_delay = max_delay
        headers = {"X-API-Key": api_key} if api_key else {}
        self._http = httpx.AsyncClient(base_url=self.url, headers=headers, timeout=timeout, transport=transport)
        self._httpx = httpx
        self._items: deque[dict[str, Any]] = deque()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._inflight = 0
        self.sent = self.refused = self.dropped = 0

    async def _call(self, method: str, path: str, *, body: Any = None, params: Mapping[str, Any] | None = None,
                    timeout: float | None = None) -> Any:
        content, headers = None, {}
        if body is not None:
            try:
                content = json.dumps(body, default=str, allow_nan=False).encode("ascii")
            except ValueError as exc:
                raise InvalidInputError(f"the request cannot be sent as JSON: {exc}") from None
            headers["Content-Type"] = "application/json"
        kwargs: dict[str, Any] = {"content": content, "headers": headers,
                                  "params": {k: v for k, v in (params or {}).items() if v is not None}}
        if timeout is not None:
            kwargs["timeout"] = timeout
        try:
            resp = await self._http.request(method, path, **kwargs)
        except self._httpx.TransportError as exc:
            raise StoreUnavailableError(f"cannot reach the BeeWeave server at {self.url}: {exc}") from exc
        return decode_response(resp)

    # -- ingest: buffered, sent by a background task ---------------------------------------------------
    async def ingest(self, event: Any) -> str:
        from .client import _event_body
        from .ingest.validate import event_dict, event_json

        body = event_dict(_event_body(event), now=utcnow())
        event_json(body, max_chars=2**62)
        if len(self._items) >= self.buffer_size:
            self._items.popleft()
            self.dropped += 1
        self._items.append(body)
        if self._wake is None:
            self._wake = asyncio.Event()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._sender())
        self._wake.set()
        return str(body["id"])

    def pending_events(self) -> int:
        return len(self._items)  # the one being sent stays at the head until taken

    async def _sender(self) -> None:
        delay = 0.0
        assert self._wake is not None
        while True:
            if not self._items:
                self._wake.clear()
                await self._wake.wait()
                continue
            body = self._items[0]
            self._inflight = 1
            try:
                await self._call("POST", "/api/v1/ingest", body=body, timeout=self.ingest_timeout)
                self.sent += 1
                delay = 0.0
                done = True
            except (StoreUnavailableError, ServerError, _ingest_errors.QueueFullError):
                delay = min(max(2 * delay, 0.1), self.max_delay)
                done = False
            except BeeWeaveError as exc:
                logger.error("AsyncBeeWeaveClient: the server refused an event (%s); it is dropped", exc)
                self.refused += 1
                done = True
            finally:
                self._inflight = 0
            if done:
                if self._items and self._items[0] is body:
                    self._items.popleft()
            else:
                await asyncio.sleep(delay)

    async def flush(self, timeout: float | None = None) -> bool:
        """``BeeWeaveClient.flush``: wait (at most ``timeout`` seconds, default 10) until the buffered
        events are sent and the server has processed its queue; False when the time ran out. A
        ``timeout`` longer than the server's ``max_flush_timeout`` is spent in several requests."""
        wait = 10.0 if timeout is None else float(timeout)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while self.pending_events():
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.02)
        while True:
            left = min(max(0.0, deadline - loop.time()), _FLUSH_CALL)
            if (await self._call("POST", "/api/v1/flush", params={"timeout": left},
                                 timeout=left + _FLUSH_MARGIN))["drained"]:
                return True
            left = deadline - loop.time()
            if not left > 0:  # (also ends a NaN timeout)
                return False
            await asyncio.sleep(min(_FLUSH_PAUSE, left))

    # -- reading and one memory ------------------------------------------------------------------------
    async def search(self, query: str, *, user_id: str | None = None, k: int = DEFAULT_TOP_K,
                     filters: Mapping[str, Any] | None = None, **options: Any) -> list[SearchHit]:
        body = {"query": query, "user_id": user_id, "k": k, "filters": _plain(filters),
                **{key: _plain_value(v) for key, v in options.items()}}
        data = await self._call("POST", "/api/v1/search", body={key: v for key, v in body.items() if v is not None},
                                timeout=self.search_timeout)
        return [_hit(h) for h in data["hits"]]

    async def search_semantic(self, query: str, *, session_id: str | None = None, user_id: str | None = None,
                              top_k: int = DEFAULT_TOP_K, tags: Sequence[str] | None = None) -> list[dict[str, Any]]:
        body = {"query": query, "session_id": session_id, "user_id": user_id, "top_k": top_k,
                "tags": None if tags is None else list(tags)}
        data = await self._call("POST", "/api/v1/search/semantic",
                                body={key: v for key, v in body.items() if v is not None}, timeout=self.search_timeout)
        return list(data["results"])

    async def add(self, content: str, *, user_id: str, **fields: Any) -> str:
        body = {"content": content, "user_id": user_id, **{k: _plain_value(v) for k, v in fields.items()}}
        if "chunk_id" in body:
            body["id"] = body.pop("chunk_id")
        return str((await self._call("POST", "/api/v1/memories", body=body))["id"])

    async def get(self, chunk_id: str) -> KnowledgeChunk:
        from urllib.parse import quote

        return _chunk(await self._call("GET", f"/api/v1/memories/{quote(chunk_id, safe='')}"))

    async def delete(self, chunk_id: str) -> bool:
        from urllib.parse import quote

        return bool((await self._call("DELETE", f"/api/v1/memories/{quote(chunk_id, safe='')}"))["deleted"])

    async def aclose(self, timeout: float = 2.0) -> None:
        """Send what is buffered (for up to ``timeout`` seconds), then close."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.pending_events() and loop.time() < deadline:
            await asyncio.sleep(0.02)
        if self._task is not None:
            self._task.cancel()
        await self._http.aclose()

    async def __aenter__(self) -> AsyncBeeWeaveClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
