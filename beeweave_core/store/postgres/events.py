"""Memory events between processes: PostgreSQL NOTIFY out, LISTEN in.

Every write to a tenant's records sends one notification per record on the tenant's
channel, inside the writing transaction, so listeners hear only committed changes and
hear them in commit order. The payload is a small JSON object::

    {"type": "memory.created", "chunk_id": "...", "user_id": "...", "agent_id": null,
     "tags": ["..."], "tenant": "...", "origin": "<the writing store's id>"}

``type`` is an ``EventType`` value. Delivery is at most once (a listener that is
disconnected misses what happens meanwhile); a consumer that must see every change
reads the records or a log (``log_read``) after reconnecting.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg import sql

__all__ = ["channel_name", "event_payloads", "RemoteListener", "to_memory_event"]

logger = logging.getLogger(__name__)

# PostgreSQL refuses a NOTIFY payload of 8000 bytes or more.
_MAX_PAYLOAD = 7900


def channel_name(schema: str, tenant: str) -> str:
    """The tenant's channel: a short, valid identifier whatever the schema and tenant names."""
    return "beeweave_" + hashlib.sha1(f"{schema}\x00{tenant}".encode()).hexdigest()[:24]


def event_payloads(event_type: str, rows: Sequence[tuple[str, str, str | None, Sequence[str]]], *,
                   tenant: str, origin: str) -> list[str]:
    """One JSON payload per (chunk_id, user_id, agent_id, tags); tags are cut to fit the limit."""
    out = []
    for chunk_id, user_id, agent_id, tags in rows:
        body: dict[str, Any] = {"type": event_type, "chunk_id": chunk_id, "user_id": user_id, "agent_id": agent_id,
                "tags": list(tags), "tenant": tenant, "origin": origin}
        text = json.dumps(body, ensure_ascii=False)
        while len(text.encode()) > _MAX_PAYLOAD and body["tags"]:
            body["tags"] = body["tags"][: len(body["tags"]) // 2]
            body["truncated"] = True
            text = json.dumps(body, ensure_ascii=False)
        out.append(text)
    return out


def to_memory_event(payload: dict[str, Any]) -> Any:
    """A payload as the engine's ``MemoryEvent`` (``data`` says it came from another process)."""
    from ...events import EventType, MemoryEvent

    return MemoryEvent(EventType(payload["type"]), payload.get("chunk_id"), payload.get("user_id"),
                       payload.get("agent_id"), tuple(payload.get("tags") or ()),
                       {"remote": True, "origin": payload.get("origin"), "tenant": payload.get("tenant")})


class RemoteListener:
    """A background thread on its own connection that LISTENs on one channel and calls
    ``callback(payload_dict)`` for each notification (from other processes only, unless
    ``include_own``). It reconnects after a lost connection. ``close()`` stops it."""

    def __init__(self, conninfo: str, channel: str, callback: Callable[[dict[str, Any]], Any], *,
                 origin: str, include_own: bool = False, poll: float = 0.2) -> None:
        self._conninfo, self._channel = conninfo, channel
        self._callback, self._origin, self._include_own = callback, origin, include_own
        self._poll = poll
        self._stop = threading.Event()
        self.errors = 0  # callback failures, logged and counted
        self._conn: psycopg.Connection | None = self._connect()  # LISTENing before we return
        self._thread = threading.Thread(target=self._run, name=f"beeweave-listen-{channel}", daemon=True)
        self._thread.start()

    def _connect(self) -> psycopg.Connection:
        conn = psycopg.connect(self._conninfo, autocommit=True)
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
        return conn

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self._conn is None:
                    self._conn = self._connect()
                for note in self._conn.notifies(timeout=self._poll):
                    self._deliver(note.payload)
                    if self._stop.is_set():
                        break
            except psycopg.Error as exc:
                if self._stop.is_set():
                    break
                logger.warning("BeeWeave event listener lost its connection (%s); reconnecting", exc)
                self._drop()
                self._stop.wait(1.0)
        self._drop()

    def _deliver(self, text: str) -> None:
        try:
            payload = json.loads(text)
        except ValueError:
            return  # not ours
        if not self._include_own and payload.get("origin") == self._origin:
            return
        try:
            self._callback(payload)
        except Exception:  # a listener's bug must not stop the delivery thread
            self.errors += 1
            logger.exception("BeeWeave remote event callback failed")

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def close(self) -> None:
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    def __enter__(self) -> RemoteListener:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
