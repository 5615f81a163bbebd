"""The newest events of a tenant's log, decoded once and shared by every SSE listener.

Each connected listener used to re-read the SQLite log under its lock, in the shared thread
pool, at every append, so every listener slowed every write (issue 47, item 7).
Now an append puts its event here once; a listener that is up to date copies what is new from
this ring in the event loop, without SQLite, the log's lock or a pool thread.

A listener is served from here only when the ring holds every event after its position,
sequence numbers without a hole. Otherwise it reads the durable log, as before: when it has
fallen behind more than the ring holds (a slow client: writers never wait for it), or when
another process appended to the same log file (its sequence numbers are the holes here).
"""

from __future__ import annotations

import json
import math
import threading
from collections import deque
from typing import Any

from ..events import EventType

__all__ = ["RecentEvents", "Sent", "wire"]

Event = dict[str, Any]
Sent = tuple[Event, str]  # an event and its JSON text, encoded once for every listener


def wire(event: Event) -> str:
    """The JSON text of an event's SSE ``data``: what FastAPI would send for the dict (a NaN
    or infinity becomes null), encoded here once per event instead of once per listener."""
    try:
        return json.dumps(event, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(event))


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


class RecentEvents:
    """A bounded ring of ``(seq, (event, its JSON))``, oldest first; a forgotten event leaves
    ``None`` (its seq stays, so the ring still proves there is no hole there)."""

    def __init__(self, capacity: int = 1024) -> None:
        self._ring: deque[tuple[int, Sent | None]] = deque(maxlen=capacity)
        # Held for one append or for copying what one reader is missing: never while a
        # listener sends, so a slow client holds up nobody.
        self._lock = threading.Lock()

    def add(self, seq: int, event: Event) -> None:
        """Called in sequence order (the log appends under its own lock)."""
        sent = (event, wire(event))
        with self._lock:
            self._ring.append((seq, sent))

    def after(self, seq: int, limit: int) -> tuple[list[Sent], int] | None:
        """The events after ``seq`` (at most ``limit``) and the last seq covered, or None when
        the ring cannot prove it holds all of them (behind it, a hole, or nothing appended)."""
        taken: list[tuple[int, Sent | None]] = []
        with self._lock:
            if not self._ring:
                return None
            if self._ring[-1][0] <= seq:
                return [], seq  # nothing newer was appended by this process
            for item in reversed(self._ring):
                if item[0] <= seq:
                    break
                taken.append(item)
        taken.reverse()
        # Sequence numbers only grow, so first == seq + 1 and last - first == count - 1 mean
        # no event is missing in between.
        if taken[0][0] != seq + 1 or taken[-1][0] - taken[0][0] != len(taken) - 1:
            return None
        taken = taken[:limit]
        return [ev for _, ev in taken if ev is not None], taken[-1][0]

    def forget_user(self, user_id: str) -> None:
        """Blank the user's events but the ``memory.deleted`` notices (as the durable log does)."""
        with self._lock:
            self._ring = deque(((seq, None if sent is not None and sent[0]["user_id"] == user_id
                                 and sent[0]["type"] != EventType.DELETED.value else sent)
                                for seq, sent in self._ring), maxlen=self._ring.maxlen)
