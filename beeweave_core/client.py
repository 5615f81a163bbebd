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
import logging
import threading
import time
import warnings
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, is_dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from . import errors as _errors
from .defaults import DEFAULT_TOP_K
from .errors import BeeWeaveError, InvalidInputError, NotFoundError, StoreUnavailableError
from .filters import build_filter
from .ingest import errors as _ingest_errors
from .lifecycle.provenance import Lineage
from .lifecycle.reports import MaintenanceReport, ReviewItem
from .lifecycle.sessions import ConversationContext, Turn
from .network import ExpandOptions
from .records import HitSource, KnowledgeChunk, SearchHit, to_datetime, utcnow
from .timewords import TimeRange

__all__ = ["BeeWeaveClient", "AuthenticationError", "ServerError", "IngestBuffer", "DEFAULT_TIMEOUTS"]

logger = logging.getLogger(__name__)

# The design's budget: an agent waits at most this long for memory (seconds).
DEFAULT_TIMEOUTS = {"ingest": 2.0, "search": 1.5, "other": 10.0}

# flush(): the server waits at most its max_flush_timeout (60 s by default) per POST /flush,
# so a longer flush is several calls. Each asks for at most _FLUSH_CALL seconds (its HTTP
# timeout stays finite and above the server's wait: asked + _FLUSH_MARGIN), with a short
# pause between calls when the server answered "not drained" before the caller's deadline.
_FLUSH_CALL = 600.0
_FLUSH_MARGIN = 30.0
_FLUSH_PAUSE = 0.1


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


def decode_response(resp: Any) -> Any:
    """A response's JSON body (None when empty or not JSON); an error status raises the
    engine's error for it. Shared by the sync and async clients."""
    try:
        data = resp.json() if resp.content else None
    except ValueError:
        data = None
    if resp.status_code >= 400:
        raise _error_for(resp.status_code, data)
    return data


def _hit(d: Mapping[str, Any]) -> SearchHit:
    sources = {name: HitSource(s["rank"], s["score"], s.get("via"), s.get("from_id"), s.get("hops") or 0)
               for name, s in d["sources"].items()}
    tr = d.get("time_range")
    when = None if not tr else TimeRange(tr["phrase"], datetime.fromisoformat(tr["start"]),
                                         datetime.fromisoformat(tr["end"]))
    return SearchHit(_chunk(d["chunk"]), d["score"], sources, d.get("loosened", False), when,
                     d.get("relevance"), bool(d.get("superseded", False)))


def _chunk(d: Mapping[str, Any]) -> KnowledgeChunk:
    return KnowledgeChunk.from_dict(dict(d))


def _event_body(event: Any) -> Any:
    if hasattr(event, "to_dict"):
        return event.to_dict()
    if is_dataclass(event) and not isinstance(event, type):
        return asdict(event)
    return event


class IngestBuffer:
    """A bounded local buffer of events on their way to the server, sent by one background thread.

    ``put`` never blocks and never does I/O: the agent's thread only appends. The sender
    posts events oldest first; an event the server could not take (unreachable, timeout,
    5xx, 429) stays at the head and is retried with exponential backoff (up to
    ``max_delay`` seconds), so nothing is lost while the server is down or stalled. An
    event the server refuses (4xx: it is malformed) is dropped and counted in ``refused``.
    When the buffer holds ``max_events``, the oldest is dropped (and counted in
    ``dropped``): the agent must never wait for memory.
    """

    def __init__(self, send: Any, *, max_events: int = 10_000, max_delay: float = 30.0) -> None:
        self._send = send
        self.max_events = max_events
        self.max_delay = max_delay
        self._items: deque[dict[str, Any]] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._inflight = 0
        self.sent = 0
        self.refused = 0
        self.dropped = 0
        self.last_error: str | None = None

    def put(self, body: dict[str, Any]) -> None:
        with self._cond:
            if self._closed:
                raise _errors.StoreClosedError("the client is closed")
            if len(self._items) >= self.max_events:
                self._items.popleft()
                self.dropped += 1
                logger.warning("BeeWeaveClient: the ingest buffer is full (%d events); the oldest was dropped",
                               self.max_events)
            self._items.append(body)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="beeweave-client-ingest", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def pending(self) -> int:
        with self._cond:
            return len(self._items)  # the one being sent stays at the head until taken

    def _run(self) -> None:
        delay = 0.0
        while True:
            with self._cond:
                while not self._items and not self._closed:
                    self._cond.wait()
                if not self._items:
                    return
                body = self._items[0]
                self._inflight = 1
            ok = False
            try:
                self._send(body)
                ok = True
                self.sent += 1
                delay = 0.0
            except (StoreUnavailableError, ServerError, _ingest_errors.QueueFullError) as exc:
                self.last_error = str(exc)
                delay = min(max(2 * delay, 0.1), self.max_delay)
            except BeeWeaveError as exc:  # the server refused it: retrying cannot help
                self.last_error = str(exc)
                self.refused += 1
                ok = True
                logger.error("BeeWeaveClient: the server refused an event (%s); it is dropped", exc)
            with self._cond:
                self._inflight = 0
                if ok and self._items and self._items[0] is body:
                    self._items.popleft()
                self._cond.notify_all()
                if not ok:
                    if self._closed:
                        return
                    self._cond.wait(delay)

    def wait(self, timeout: float | None) -> bool:
        """Wait until every buffered event was sent; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._items or self._inflight:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left if left is None else min(left, 0.1))
            return True

    def close(self, timeout: float = 2.0) -> None:
        self.wait(timeout)
        with self._cond:
            self._closed = True
            left = len(self._items)
            self._cond.notify_all()
        if left:
            logger.warning("BeeWeaveClient closed with %d events not yet delivered", left)


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"BeeWeaveClient.{old} is deprecated: use BeeWeaveClient.{new}, the one review flow for "
                  "pending and flagged memories", DeprecationWarning, stacklevel=3)


class BeeWeaveClient:
    """A client of one tenant's memory on a BeeWeave server.

    An agent never waits for memory: ``ingest`` checks the event and puts it in a local
    bounded buffer (:class:`IngestBuffer`) that a background thread sends, retrying until
    the server takes it; searches time out after ``search_timeout`` seconds (1.5 s by
    default) and raise ``StoreUnavailableError``, which the LangChain and LlamaIndex faces
    turn into "no memories" for that turn.

    Args:
        url: the server, e.g. ``http://127.0.0.1:8000``.
        api_key: the tenant's API key (sent as ``X-API-Key``).
        timeout: seconds for other requests (default 10).
        ingest_timeout: seconds per ingest request (default 2).
        search_timeout: seconds per search request (default 1.5).
        background_ingest: ``False`` sends each ingest at once and returns the server's id
            (raising its errors) instead of buffering.
        buffer_size: the most events the buffer holds (the oldest is dropped beyond it).
        transport: an ``httpx`` transport (tests pass ``httpx.MockTransport`` or an ASGI one).
    """

    def __init__(self, url: str, api_key: str | None = None, *, timeout: float = DEFAULT_TIMEOUTS["other"],
                 ingest_timeout: float = DEFAULT_TIMEOUTS["ingest"], search_timeout: float = DEFAULT_TIMEOUTS["search"],
                 background_ingest: bool = True, buffer_size: int = 10_000, transport: Any = None) -> None:
        try:
            import httpx
        except ImportError as exc:
            raise _errors.MissingDependencyError('BeeWeaveClient needs httpx: pip install "beeweave-memory[client]"') from exc
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidInputError(f"url must start with http:// or https://, got {url!r}")
        for name, value in (("timeout", timeout), ("ingest_timeout", ingest_timeout),
                            ("search_timeout", search_timeout)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise InvalidInputError(f"{name} must be a positive number of seconds")
        self.url = url.rstrip("/")
        self.ingest_timeout = float(ingest_timeout)
        self.search_timeout = float(search_timeout)
        headers = {"X-API-Key": api_key} if api_key else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, transport=transport)
        self._httpx = httpx
        self.background_ingest = background_ingest
        self.buffer = IngestBuffer(self._post_event, max_events=buffer_size)

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
        return decode_response(resp)

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
        if not self.background_ingest:
            return self._post_event(body)
        self.buffer.put(body)  # the id is final: the server keeps the event's id
        return str(body["id"])

    def _post_event(self, body: dict[str, Any]) -> str:
        return self._call("POST", "/api/v1/ingest", body=body, timeout=self.ingest_timeout)["id"]

    def pending_events(self) -> int:
        """Events in the local buffer, not yet taken by the server."""
        return self.buffer.pending()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds, default 10) until the buffered events are sent and the
        server has processed its queue; True when everything was processed, False when the time ran out.

        The server waits at most its ``max_flush_timeout`` (60 s by default) per request; a longer
        ``timeout`` is spent in as many requests as it takes."""
        wait = 10.0 if timeout is None else float(timeout)
        deadline = time.monotonic() + wait
        if not self.buffer.wait(wait):
            return False
        while True:
            left = min(max(0.0, deadline - time.monotonic()), _FLUSH_CALL)
            if self._call("POST", "/api/v1/flush", params={"timeout": left},
                          timeout=left + _FLUSH_MARGIN)["drained"]:
                return True
            left = deadline - time.monotonic()
            if not left > 0:  # (also ends a NaN timeout)
                return False
            time.sleep(min(_FLUSH_PAUSE, left))

    def search(self, query: str, *, user_id: str | None = None, k: int = DEFAULT_TOP_K, filters: Mapping[str, Any] | None = None,
               fusion: Any = None, min_score: float | None = None, query_embedding: Sequence[float] | None = None,
               expand: Any = None, rerank: Any = None, mmr: float | None = None,
               loosen: bool = False, min_relevance: float | None = None,
               abstain_below: float | None = None, as_of: datetime | str | None = None,
               scopes: Sequence[str] | str | None = None) -> list[SearchHit]:
        """``BeeWeave.search`` on the server. ``rerank`` (an in-process model) cannot travel: use
        ``mmr`` or run a ``Reranker`` on the returned hits."""
        # The engine's errors (UnknownFilterError...) before any request; the server's declared
        # fields are asked for only when a key is not a built-in one.
        build_filter(filters, user_id=user_id, declared=self.declared_fields)
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
                "loosen": loosen, "min_relevance": min_relevance, "abstain_below": abstain_below,
                "query_embedding": None if query_embedding is None else [float(x) for x in query_embedding],
                "as_of": as_of.isoformat() if isinstance(as_of, datetime) else as_of,
                "scopes": [scopes] if isinstance(scopes, str) else None if scopes is None else list(scopes)}
        data = self._call("POST", "/api/v1/search", body={k_: v for k_, v in body.items() if v is not None},
                          timeout=self.search_timeout)
        return [_hit(h) for h in data["hits"]]

    def search_semantic(self, query: str, *, session_id: str | None = None, user_id: str | None = None,
                        top_k: int = DEFAULT_TOP_K, tags: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The design document's search: results with ``id, query, agent_response, score``."""
        body = {"query": query, "session_id": session_id, "user_id": user_id, "top_k": top_k,
                "tags": None if tags is None else list(tags)}
        data = self._call("POST", "/api/v1/search/semantic", body={k: v for k, v in body.items() if v is not None},
                          timeout=self.search_timeout)
        return list(data["results"])

    # -- one memory ----------------------------------------------------------------------------------
    def add(self, content: str, *, user_id: str, **fields: Any) -> str:
        """Add one memory (redacted and admitted on the server); returns its id. ``chunk_id=``
        sets the id; other fields: tags, metadata, pinned, expires_at, confidence, weight..."""
        return self.add_memory({"content": content, "user_id": user_id, **fields}).id

    def add_memory(self, record: Mapping[str, Any]) -> KnowledgeChunk:
        body = {k: _plain_value(v) for k, v in record.items() if v is not None}
        if "chunk_id" in body:
            body["id"] = body.pop("chunk_id")
        return _chunk(self._call("POST", "/api/v1/memories", body=body))

    def get(self, chunk_id: str) -> KnowledgeChunk:
        return _chunk(self._call("GET", f"/api/v1/memories/{self._seg(chunk_id, 'chunk_id')}"))

    def update(self, chunk_id: str, **changes: Any) -> KnowledgeChunk:
        """Edit a memory: content, tags, pinned, expires_at, confidence, status, metadata, summary, weight."""
        if "raw_content" in changes:
            changes["content"] = changes.pop("raw_content")
        body = {k: _plain_value(v) for k, v in changes.items()}
        return _chunk(self._call("PATCH", f"/api/v1/memories/{self._seg(chunk_id, 'chunk_id')}", body=body))

    def delete(self, chunk_id: str) -> bool:
        return bool(self._call("DELETE", f"/api/v1/memories/{self._seg(chunk_id, 'chunk_id')}")["deleted"])

    def list_memories(self, *, user_id: str | None = None, agent_id: str | None = None,
                      session_id: str | None = None, tags: Sequence[str] | None = None,
                      status: Sequence[str] | None = None, metadata: Mapping[str, Any] | None = None,
                      limit: int = 50, cursor: str | None = None) -> Any:
        """One page of memories (oldest first) and the cursor of the next page (None at the end)."""
        params = {"user_id": user_id, "agent_id": agent_id, "session_id": session_id,
                  "tags": None if tags is None else list(tags),
                  "status": None if status is None else [getattr(s, "value", s) for s in status],
                  "metadata": None if metadata is None else json.dumps(metadata), "limit": limit, "cursor": cursor}
        data = self._call("GET", "/api/v1/memories", params=params)
        from .server.service import Page

        return Page([_chunk(c) for c in data["memories"]], data.get("next_cursor"))

    # MemoryService's names, so the CLI drives a server and a local store alike.
    def get_memory(self, chunk_id: str) -> KnowledgeChunk:
        return self.get(chunk_id)

    def update_memory(self, chunk_id: str, changes: Mapping[str, Any]) -> KnowledgeChunk:
        return self.update(chunk_id, **changes)

    def delete_memory(self, chunk_id: str) -> bool:
        return self.delete(chunk_id)

    def history(self, chunk_id: str) -> list[dict[str, Any]]:
        return self._call("GET", f"/api/v1/memories/{self._seg(chunk_id, 'chunk_id')}/history")["versions"]

    def lineage(self, chunk_id: str) -> Lineage:
        """Where a memory came from (``GET /memories/{id}/lineage``)."""
        return Lineage(**self._call("GET", f"/api/v1/memories/{self._seg(chunk_id, 'chunk_id')}/lineage"))

    def relationships(self, chunk_id: str, *, types: Iterable[str] | None = None,
                      direction: str = "both") -> list[Any]:
        from .records import Relationship

        data = self._call("GET", f"/api/v1/memories/{self._seg(chunk_id, 'chunk_id')}/relationships",
                          params={"direction": direction, "type": None if types is None else list(types)})
        return [Relationship.from_dict(e) for e in data["relationships"]]

    def relate(self, source_id: str, target_id: str, type: str, *, weight: float = 1.0,
               note: str | None = None) -> Any:
        """A user-defined typed edge between two memories (``BeeWeave.relate``): the ``Relationship``."""
        from .records import Relationship

        return Relationship.from_dict(self._call("POST", "/api/v1/relationships", body={
            "source_id": source_id, "target_id": target_id, "type": type, "weight": weight, "note": note}))

    def facts(self, user_id: str) -> dict[str, KnowledgeChunk]:
        data = self._call("GET", f"/api/v1/users/{self._seg(user_id, 'user_id')}/facts")
        return {k: _chunk(v) for k, v in data["facts"].items()}

    def hot_patterns(self, *, user_id: str | None = None) -> list[dict[str, Any]]:
        return self._call("GET", "/api/v1/patterns/hot", params={"user_id": user_id})["patterns"]

    def dead_letters(self, limit: int | None = None, *, user_id: str | None = None) -> list[Any]:
        """The server's dead letters (events whose processing failed), as ``DeadLetter`` s."""
        from .ingest.knowledge_events import DeadLetter, KnowledgeEvent

        data = self._call("GET", "/api/v1/dead-letters", params={"limit": limit, "user_id": user_id})
        return [DeadLetter(KnowledgeEvent.from_dict({k: v for k, v in d["event"].items() if v is not None or k in
                                                     ("session_id", "agent_id")}),
                           d["error"], d["attempts"], to_datetime(d["failed_at"])) for d in data["dead_letters"]]

    def retry_dead_letters(self, ids: str | Iterable[str] | None = None) -> int:
        body = {} if ids is None else {"ids": _id_list(ids)}
        return self._call("POST", "/api/v1/dead-letters/retry", body=body)["retried"]

    def feedback(self, chunk_ids: str | Iterable[str], signal: Any) -> list[KnowledgeChunk]:
        ids = [chunk_ids] if isinstance(chunk_ids, str) else list(chunk_ids)
        data = self._call("POST", "/api/v1/feedback", body={"chunk_ids": ids, "signal": getattr(signal, "value", signal)})
        return [_chunk(c) for c in data["chunks"]]

    def trace(self, session_id: str, *, user_id: str | None = None) -> list[KnowledgeChunk]:
        data = self._call("GET", f"/api/v1/sessions/{self._seg(session_id, 'session_id')}/trace",
                          params={"user_id": user_id})
        return [_chunk(c) for c in data["chunks"]]

    def add_turn(self, session_id: str, role: str, content: str, *, user_id: str) -> ConversationContext:
        data = self._call("POST", f"/api/v1/sessions/{self._seg(session_id, 'session_id')}/turns",
                          body={"user_id": user_id, "role": role, "content": content})
        return _conversation(data)

    def get_conversation_context(self, session_id: str, window: int = 10, *, user_id: str) -> ConversationContext:
        data = self._call("GET", f"/api/v1/sessions/{self._seg(session_id, 'session_id')}/context",
                          params={"user_id": user_id, "window": window})
        return _conversation(data)

    def review(self, *, user_id: str | None = None, agent_id: str | None = None, limit: int | None = None,
               reasons: str | Sequence[str] | None = None) -> list[ReviewItem]:
        """Memories waiting for a decision, oldest first, each with its memory (``BeeWeave.review``)."""
        params: dict[str, Any] = {"user_id": user_id, "agent_id": agent_id, "limit": limit,
                                  "reason": [reasons] if isinstance(reasons, str) else reasons}
        data = self._call("GET", "/api/v1/review", params=params)
        return [ReviewItem(i["chunk_id"], i.get("user_id"), tuple(i["reasons"]), to_datetime(i["flagged_at"]),
                           _chunk(i["chunk"]) if i.get("chunk") else None) for i in data["items"]]

    def decide(self, ids: str | Iterable[str], decision: Any, *, reason: str | None = None) -> list[str]:
        """Decide on memories waiting for review: keep, archive or delete (``BeeWeave.decide``)."""
        body = {"ids": _id_list(ids), "decision": getattr(decision, "value", decision), "reason": reason}
        return self._call("POST", "/api/v1/review/decide", body=body)["ids"]

    def pending(self, *, user_id: str | None = None, agent_id: str | None = None,
                limit: int | None = None) -> list[KnowledgeChunk]:
        """Deprecated: ``review(reasons="pending")``."""
        _deprecated("pending()", 'review(reasons="pending")')
        data = self._call("GET", "/api/v1/review/pending", params={"user_id": user_id, "agent_id": agent_id,
                                                                    "limit": limit})
        return [_chunk(c) for c in data["chunks"]]

    def approve(self, ids: str | Iterable[str]) -> list[str]:
        """Deprecated: ``decide(ids, "keep")``."""
        _deprecated("approve()", 'decide(ids, "keep")')
        return self._call("POST", "/api/v1/review/approve", body={"ids": _id_list(ids)})["ids"]

    def reject(self, ids: str | Iterable[str], *, reason: str | None = None) -> list[str]:
        """Deprecated: ``decide(ids, "delete", reason=...)``."""
        _deprecated("reject()", 'decide(ids, "delete", reason=...)')
        return self._call("POST", "/api/v1/review/reject", body={"ids": _id_list(ids), "reason": reason})["ids"]

    def review_queue(self, *, user_id: str | None = None) -> list[ReviewItem]:
        """Deprecated: ``review()`` (every reason but "pending")."""
        _deprecated("review_queue()", "review()")
        data = self._call("GET", "/api/v1/review/queue", params={"user_id": user_id})
        return [ReviewItem(i["chunk_id"], i.get("user_id"), tuple(i["reasons"]), to_datetime(i["flagged_at"]))
                for i in data["items"]]

    def resolve_review(self, chunk_id: str, decision: Any) -> KnowledgeChunk | None:
        """Deprecated: ``decide([chunk_id], decision)``."""
        _deprecated("resolve_review()", "decide(ids, decision)")
        data = self._call("POST", "/api/v1/review/resolve",
                          body={"chunk_id": chunk_id, "decision": getattr(decision, "value", decision)})
        return _chunk(data["chunks"][0]) if data["chunks"] else None

    def maintain(self, *, user_id: str | None = None) -> MaintenanceReport:
        return MaintenanceReport(**self._call("POST", "/api/v1/maintain", params={"user_id": user_id}))

    def declare_fields(self, fields: Mapping[str, str]) -> dict[str, str]:
        """``BeeWeave.declare_fields`` on the server (admin key); returns every declared field."""
        if not isinstance(fields, Mapping):
            raise InvalidInputError("declare_fields takes a non-empty mapping of field name to type")
        return dict(self._call("POST", "/api/v1/fields", body={"fields": dict(fields)})["fields"])

    def declared_fields(self) -> dict[str, str]:
        return dict(self._call("GET", "/api/v1/fields")["fields"])

    # -- service methods (not on the engine) ---------------------------------------------------------
    def export_user(self, user_id: str) -> dict[str, Any]:
        """All of a user's data as JSON (``NotFoundError`` if the server has none)."""
        return self._call("GET", f"/api/v1/users/{self._seg(user_id, 'user_id')}/export")

    def import_user(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Write a user's export back on the server (``ImportReport.to_dict()``). One request:
        an export larger than the server's body limit is refused (413); ``beeweave copy``
        moves larger stores directly."""
        if not isinstance(data, Mapping) or not isinstance(data.get("user_id"), str):
            raise InvalidInputError("an export is a JSON object with its user_id")
        return self._call("POST", f"/api/v1/users/{self._seg(data['user_id'], 'user_id')}/import", body=dict(data))

    def check_import(self, data: Mapping[str, Any]) -> Mapping[str, Any]:
        """Have the server check ``data`` as ``import_user`` would, writing nothing (raises what
        the import would); returns ``data``, which ``import_user`` takes."""
        if not isinstance(data, Mapping) or not isinstance(data.get("user_id"), str):
            raise InvalidInputError("an export is a JSON object with its user_id")
        self._call("POST", f"/api/v1/users/{self._seg(data['user_id'], 'user_id')}/import/check", body=dict(data))
        return data

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
        try:
            self.buffer.close()
        finally:
            self._http.close()

    def __enter__(self) -> BeeWeaveClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _plain_value(v: Any) -> Any:
    if hasattr(v, "value") and isinstance(v.value, str):
        return v.value
    if hasattr(v, "isoformat"):
        return v.isoformat()
    if isinstance(v, (set, frozenset, tuple)):
        return list(v)
    return v


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


def _conversation(data: dict[str, Any]) -> ConversationContext:
    return ConversationContext(data["session_id"], data["user_id"], data["summary"],
                               tuple(Turn.from_dict(t) for t in data["turns"]), data["total_turns"],
                               data["summarized_turns"], data["summarizer"])
