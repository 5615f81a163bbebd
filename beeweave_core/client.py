"""``BeeWeaveClient``: a BeeWeave server used like a local ``BeeWeave``.

The methods have the engine's names and meanings where they make sense over HTTP
(``ingest``, ``search``, ``feedback``, ``trace``, ``pending``/``approve``/``reject``,
``flush``...), return the engine's types (``SearchHit``, ``KnowledgeChunk``) and raise the
engine's errors: the LangChain and LlamaIndex adapters take a client wherever they take
a store.

Usage:
    .. code-block:: python

        from beeweave_core.client import BeeWeaveClient
        from beeweave_langchain import BeeWeaveRetriever

        memory = BeeWeaveClient("http://127.0.0.1:8000", api_key="...")
        memory.ingest({"user_id": "alice", "query": "Where do I deploy?", "response": "On the k8s cluster."})
        retriever = BeeWeaveRetriever(memory=memory, user_id="alice")
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, is_dataclass
from typing import Any
from urllib.parse import quote

from . import errors as _errors
from .errors import BeeWeaveError, InvalidInputError, NotFoundError, StoreUnavailableError
from .ingest import errors as _ingest_errors
from .lifecycle.reports import MaintenanceReport, ReviewItem
from .filters import build_filter
from .network import ExpandOptions
from .records import HitSource, KnowledgeChunk, SearchHit, to_datetime, utcnow

__all__ = ["BeeWeaveClient", "AuthenticationError", "ServerError"]


class AuthenticationError(BeeWeaveError, PermissionError):
    """The server refused the API key (401: none was sent; 403: it is not recognised)."""


class ServerError(BeeWeaveError):
    """The server failed (5xx) for a reason other than an unavailable store."""


_KNOWN = {name: getattr(_errors, name) for name in _errors.__all__}
_KNOWN.update({name: getattr(_ingest_errors, name) for name in _ingest_errors.__all__})
_BY_STATUS: dict[int, type[BeeWeaveError]] = {400: InvalidInputError, 404: NotFoundError, 409: _errors.DuplicateIdError,
                                              413: InvalidInputError, 422: InvalidInputError,
                                              503: StoreUnavailableError}


def _error_for(status: int, body: Any) -> BeeWeaveError:
    kind = body.get("error") if isinstance(body, dict) else None
    detail = body.get("detail") if isinstance(body, dict) else None
    message = f"{detail or 'HTTP ' + str(status)} (HTTP {status})"
    if status in (401, 403):
        return AuthenticationError(message)
    cls = _KNOWN.get(kind) if isinstance(kind, str) else None
    if cls is None:
        cls = _BY_STATUS.get(status, ServerError if status >= 500 else InvalidInputError)
    return cls(message)


def _hit(d: Mapping[str, Any]) -> SearchHit:
    sources = {name: HitSource(s["rank"], s["score"], s.get("via"), s.get("from_id"), s.get("hops") or 0)
               for name, s in d["sources"].items()}
    return SearchHit(_chunk(d["chunk"]), d["score"], sources, d.get("loosened", False))


def _chunk(d: Mapping[str, Any]) -> KnowledgeChunk:
    return KnowledgeChunk.from_dict(dict(d))


def _event_body(event: Any) -> Any:
    if hasattr(event, "to_dict"):
        return event.to_dict()
    if is_dataclass(event) and not isinstance(event, type):
        return asdict(event)
    return event


class BeeWeaveClient:
    """A client of one tenant's memory on a BeeWeave server.

    Args:
        url: the server, e.g. ``http://127.0.0.1:8000``.
        api_key: the tenant's API key (sent as ``X-API-Key``).
        timeout: seconds per request.
        transport: an ``httpx`` transport (tests pass ``httpx.MockTransport`` or an ASGI one).
    """

    def __init__(self, url: str, api_key: str | None = None, *, timeout: float = 30.0, transport: Any = None) -> None:
        try:
            import httpx
        except ImportError as exc:
            raise _errors.MissingDependencyError('BeeWeaveClient needs httpx: pip install "beeweave[server]"') from exc
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidInputError(f"url must start with http:// or https://, got {url!r}")
        self.url = url.rstrip("/")
        headers = {"X-API-Key": api_key} if api_key else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, transport=transport)
        self._httpx = httpx

    # -- plumbing ------------------------------------------------------------------------------
    def _call(self, method: str, path: str, *, body: Any = None, params: Mapping[str, Any] | None = None,
              timeout: float | None = None) -> Any:
        content = None
        headers = {}
        if body is not None:
            try:
                # ASCII-escaped, so a lone surrogate travels as "\ud800" and the server can say what is wrong.
                content = json.dumps(body, default=str, allow_nan=False).encode("ascii")
            except ValueError as exc:
                raise InvalidInputError(f"the request cannot be sent as JSON: {exc}") from None
            headers["Content-Type"] = "application/json"
        query = {k: v for k, v in (params or {}).items() if v is not None}
        kwargs: dict[str, Any] = {"content": content, "params": query, "headers": headers}
        if timeout is not None:
            kwargs["timeout"] = timeout
        try:
            resp = self._http.request(method, path, **kwargs)
        except self._httpx.TransportError as exc:
            raise StoreUnavailableError(f"cannot reach the BeeWeave server at {self.url}: {exc}") from exc
        try:
            data = resp.json() if resp.content else None
        except ValueError:
            data = None
        if resp.status_code >= 400:
            raise _error_for(resp.status_code, data)
        return data

    @staticmethod
    def _seg(value: Any, name: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise InvalidInputError(f"{name} must be a non-empty string")
        return quote(value, safe="")

    # -- the engine's methods ---------------------------------------------------------------------
    def ingest(self, event: Any) -> str:
        """Queue a ``KnowledgeEvent`` (or its dict) on the server; returns the event id.

        The event is checked here first, by the engine's own rules, so a bad event raises
        the same error as a local ``ingest`` and is never sent."""
        from .ingest.validate import event_dict, event_json

        body = event_dict(_event_body(event), now=utcnow())
        event_json(body, max_chars=2**62)  # text that is not valid Unicode; the server applies its own size limit
        return self._call("POST", "/api/v1/ingest", body=body)["id"]

    def flush(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds, default 10) until the server has processed the queued events."""
        wait = 10.0 if timeout is None else float(timeout)
        return self._call("POST", "/api/v1/flush", params={"timeout": wait}, timeout=wait + 30)["drained"]

    def search(self, query: str, *, user_id: str | None = None, k: int = 5, filters: Mapping[str, Any] | None = None,
               fusion: Any = None, min_score: float | None = None, query_embedding: Sequence[float] | None = None,
               expand: Any = None, rerank: Any = None, mmr: float | None = None,
               loosen: bool = False) -> list[SearchHit]:
        """``BeeWeave.search`` on the server. ``rerank`` (an in-process model) cannot travel: use
        ``mmr`` or run a ``Reranker`` on the returned hits."""
        build_filter(filters, user_id=user_id)  # the engine's errors (UnknownFilterError...) before any request
        if rerank is not None:
            raise InvalidInputError("a Reranker runs in-process and cannot be sent to a server: "
                                    "call reranker.rerank(query, hits) on the returned hits")
        if isinstance(expand, ExpandOptions):
            expand = {"hops": expand.hops, "decay": expand.decay, "limit": expand.limit,
                      "edge_types": None if expand.edge_types is None else list(expand.edge_types)}
        elif expand is not None and not isinstance(expand, bool):
            raise InvalidInputError("expand must be a bool or an ExpandOptions")
        body = {"query": query, "user_id": user_id, "k": k, "filters": _plain(filters),
                "fusion": getattr(fusion, "value", fusion), "min_score": min_score, "expand": expand, "mmr": mmr,
                "loosen": loosen,
                "query_embedding": None if query_embedding is None else [float(x) for x in query_embedding]}
        data = self._call("POST", "/api/v1/search", body={k_: v for k_, v in body.items() if v is not None})
        return [_hit(h) for h in data["hits"]]

    def feedback(self, chunk_ids: str | Iterable[str], signal: Any) -> list[KnowledgeChunk]:
        ids = [chunk_ids] if isinstance(chunk_ids, str) else list(chunk_ids)
        data = self._call("POST", "/api/v1/feedback", body={"chunk_ids": ids, "signal": getattr(signal, "value", signal)})
        return [_chunk(c) for c in data["chunks"]]

    def trace(self, session_id: str, *, user_id: str | None = None) -> list[KnowledgeChunk]:
        data = self._call("GET", f"/api/v1/sessions/{self._seg(session_id, 'session_id')}/trace",
                          params={"user_id": user_id})
        return [_chunk(c) for c in data["chunks"]]

    def pending(self, *, user_id: str | None = None, agent_id: str | None = None,
                limit: int | None = None) -> list[KnowledgeChunk]:
        data = self._call("GET", "/api/v1/review/pending", params={"user_id": user_id, "agent_id": agent_id,
                                                                    "limit": limit})
        return [_chunk(c) for c in data["chunks"]]

    def approve(self, ids: str | Iterable[str]) -> list[str]:
        return self._call("POST", "/api/v1/review/approve", body={"ids": _id_list(ids)})["ids"]

    def reject(self, ids: str | Iterable[str], *, reason: str | None = None) -> list[str]:
        return self._call("POST", "/api/v1/review/reject", body={"ids": _id_list(ids), "reason": reason})["ids"]

    def review_queue(self, *, user_id: str | None = None) -> list[ReviewItem]:
        data = self._call("GET", "/api/v1/review/queue", params={"user_id": user_id})
        return [ReviewItem(i["chunk_id"], i.get("user_id"), tuple(i["reasons"]), to_datetime(i["flagged_at"]))
                for i in data["items"]]

    def resolve_review(self, chunk_id: str, decision: Any) -> KnowledgeChunk | None:
        data = self._call("POST", "/api/v1/review/resolve",
                          body={"chunk_id": chunk_id, "decision": getattr(decision, "value", decision)})
        return _chunk(data["chunks"][0]) if data["chunks"] else None

    def maintain(self, *, user_id: str | None = None) -> MaintenanceReport:
        return MaintenanceReport(**self._call("POST", "/api/v1/maintain", params={"user_id": user_id}))

    # -- service methods (not on the engine) ---------------------------------------------------------
    def export_user(self, user_id: str) -> dict[str, Any]:
        """All of a user's data as JSON (``NotFoundError`` if the server has none)."""
        return self._call("GET", f"/api/v1/users/{self._seg(user_id, 'user_id')}/export")

    def forget_user(self, user_id: str) -> int:
        """Delete everything of a user on the server; returns how many memories were deleted."""
        return self._call("DELETE", f"/api/v1/users/{self._seg(user_id, 'user_id')}")["deleted"]

    def stats(self, *, user_id: str | None = None, top: int = 10) -> dict[str, Any]:
        """The tenant's statistics (the JSON of ``MemoryStats.to_dict()``)."""
        return self._call("GET", "/api/v1/stats", params={"user_id": user_id, "top": top})

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/healthz")

    def openapi(self) -> dict[str, Any]:
        return self._call("GET", "/openapi.json")

    # -- lifecycle --------------------------------------------------------------------------------------
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> BeeWeaveClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _id_list(ids: str | Iterable[str]) -> list[str]:
    return [ids] if isinstance(ids, str) else list(ids)


def _plain(filters: Mapping[str, Any] | None) -> Any:
    """Filters as JSON: enums by value, sets as lists, datetimes as ISO strings."""
    if filters is None:
        return None
    if not isinstance(filters, Mapping):
        raise InvalidInputError(f"filters must be a mapping, got {type(filters).__name__}")

    def plain(v: Any) -> Any:
        if hasattr(v, "value") and isinstance(v.value, str):
            return v.value
        if hasattr(v, "isoformat"):
            return v.isoformat()
        if isinstance(v, (set, frozenset, tuple, list)):
            return [plain(x) for x in v]
        return v

    return {k: plain(v) for k, v in filters.items()}
